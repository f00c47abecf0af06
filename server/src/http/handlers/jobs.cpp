#include <functional>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"
#include "store/bisect_repository.hpp"
#include "store/job_repository.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

using nlohmann::json;

// A streamed stage: {"agent", "started": NAME} as a stage starts, or
// {"agent", "stage": {...}} with the stage as its report will hold it.
StageProgress stage_progress(const json& body) {
  constexpr std::size_t kMaxText = common::kMaxTextBytes;
  const bool started = body.contains("started"), ended = body.contains("stage");
  if (started == ended)
    throw Unprocessable("missing_field", "stage", "exactly one of started and stage is required");
  StageProgress progress;
  if (started) {
    progress.name = body_string(body, "started");
    if (!common::stage_name_from(progress.name)) {
      throw Unprocessable(
          "invalid_value", "started",
          "unknown stage \"" + progress.name +
              "\" (expected config, build, load, launch_geometry, correctness, quick_bench or full_bench)");
    }
    progress.status = "started";
  } else {
    common::Stage stage = common::parse_stage(body["stage"]);
    progress.name = common::to_string(stage.name);
    progress.status = common::to_string(stage.status);
    progress.duration_ms = stage.duration_ms;
    progress.gpu_seconds = stage.gpu_seconds;
    progress.message = std::move(stage.message);
    progress.log_tail = std::move(stage.log_tail);
    if (progress.message.size() > kMaxText)
      throw Unprocessable("too_long", "stage.message", "at most 65536 bytes");
    if (progress.log_tail.size() > kMaxText)
      throw Unprocessable("too_long", "stage.log_tail", "at most 65536 bytes");
  }
  progress.ordinal = static_cast<int>(*common::stage_name_from(progress.name));
  return progress;
}

using HolderAction = std::function<bool(pqxx::work&, std::int64_t job_id, std::int64_t agent_id)>;

// What the holder of a running job does to it: `action` returns false when
// this agent does not hold the job, answered 404 or 409.
Response as_holder(const HandlerContext& context, Request& request, const json& body, const char* verb,
                   const HolderAction& action) {
  std::int64_t id = request.id_param("id", "job");
  std::string name = body_string(body, "agent");
  auto job = with_transaction(context.pool, [&](pqxx::work& tx) {
    auto hold = JobRepository::lock(tx, id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(id));
    request.caller->require_project(RunRepository::project_name(tx, hold->project_id));
    std::int64_t agent_id = JobRepository::registered_agent(tx, name, *request.caller);
    if (!action(tx, id, agent_id)) {
      auto current = JobRepository::get(tx, id);
      throw Conflict("job_not_held", "agent \"" + name + "\" does not hold job " + std::to_string(id) +
                                         " (state " + current->value("state", "") + "); cannot " + verb);
    }
    return *JobRepository::get(tx, id);
  });
  return Response::json(200, job);
}

// A push's range: the bisect searches at most this many commits.
constexpr std::size_t kMaxRange = 1001;

// A job as POST /api/v1/jobs asks for it, checked field by field; the
// project's name goes to `project`.
NewJob new_job_from(const json& body, const Request& request, std::string& project) {
  NewJob job;
  project = body_string(body, "project");
  common::check_project_name(project, "project");
  request.caller->require_project(project);
  job.commit = body_string(body, "commit");
  if (!common::is_commit_sha(job.commit))
    throw Unprocessable("invalid_value", "commit", "must be a 40-character lowercase hex SHA");
  job.branch = body_string(body, "branch");
  std::string base = body_string(body, "base_commit", false);
  if (!base.empty()) {
    if (!common::is_commit_sha(base))
      throw Unprocessable("invalid_value", "base_commit", "must be a 40-character lowercase hex SHA");
    job.base_commit = base;
  }
  job.pr = body_integer(body, "pr", 1, common::kMaxInt32);
  std::string gpu_class = body_string(body, "gpu_class", false);
  if (!gpu_class.empty()) job.gpu_class = gpu_class;
  if (body.contains("rerun")) {
    if (!body["rerun"].is_boolean()) throw Unprocessable("wrong_type", "rerun", "must be true or false");
    job.rerun = body["rerun"].get<bool>();
  }
  // Split over this many GPUs of the job's model, each measuring its part.
  if (auto shards = body_integer(body, "shards", 1, common::kMaxShards))
    job.shards = static_cast<int>(*shards);
  if (body.contains("range")) {
    const json& range = body["range"];
    if (!range.is_array() || range.size() < 2 || range.size() > kMaxRange)
      throw Unprocessable("invalid_value", "range",
                          "must be an array of 2 to " + std::to_string(kMaxRange) +
                              " commits: the last measured before the push, then the pushed ones");
    for (std::size_t i = 0; i < range.size(); ++i) {
      if (!range[i].is_string() || !common::is_commit_sha(range[i].get<std::string>()))
        throw Unprocessable("invalid_value", "range[" + std::to_string(i) + "]",
                            "must be a 40-character lowercase hex SHA");
      job.range.push_back(range[i].get<std::string>());
    }
    if (job.range.back() != job.commit)
      throw Unprocessable("inconsistent", "range", "must end with the job's commit");
  }
  return job;
}

void add_bisect_routes(Router& router, const HandlerContext& context) {
  const Access ci = Access::of({Scope::ci});
  router.add("GET", "/api/v1/bisects/{id}", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "bisect");
    return Response::json(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                            auto project = BisectRepository::project_of(tx, id);
                            if (!project) throw NotFound("no_such_bisect", "no bisect " + std::to_string(id));
                            check_project(request, *project);
                            return *BisectRepository::get(tx, id);
                          }));
  });

  router.add("POST", "/api/v1/bisects/{id}/cancel", ci, [&context](Request& request) {
    std::int64_t id = request.id_param("id", "bisect");
    return Response::json(
        200, with_transaction(context.pool, [&](pqxx::work& tx) {
          auto project = BisectRepository::project_of(tx, id);
          if (!project) throw NotFound("no_such_bisect", "no bisect " + std::to_string(id));
          request.caller->require_project(*project);
          auto previous = BisectRepository::cancel(tx, id);
          if (*previous != "running")
            throw Conflict("bisect_ended", "bisect " + std::to_string(id) + " has ended (" + *previous + ")");
          return *BisectRepository::get(tx, id);
        }));
  });
}

}  // namespace

void add_job_routes(Router& router, const HandlerContext& context) {
  add_bisect_routes(router, context);
  const Access agent = Access::of({Scope::agent});
  const Access ci = Access::of({Scope::ci});

  router.add("POST", "/api/v1/jobs", ci, [&context](Request& request) {
    std::string project;
    NewJob job = new_job_from(require_object(request), request, project);
    job.max_attempts = context.max_attempts;
    auto [created, document] = with_transaction(context.pool, [&](pqxx::work& tx) {
      job.project_id = RunRepository::require_project(tx, project);
      auto [job_id, was_created] = JobRepository::create(tx, job);
      json job_json = *JobRepository::get(tx, job_id);
      if (was_created)
        NotificationRepository::job_queued(tx, context.notifications, job.project_id, job_json);
      return std::make_pair(was_created, job_json);
    });
    return Response::json(created ? 201 : 200, document);
  });

  router.add("GET", "/api/v1/jobs/{id}", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "job");
    auto job = with_transaction(context.pool, [&](pqxx::work& tx) { return JobRepository::get(tx, id); });
    if (!job) throw NotFound("no_such_job", "no job " + std::to_string(id));
    check_project(request, job->value("project", ""));
    return Response::json(200, *job);
  });

  router.add("POST", "/api/v1/jobs/{id}/heartbeat", agent, [&context](Request& request) {
    return as_holder(context, request, require_object(request), "heartbeat",
                     [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                       return JobRepository::heartbeat(tx, id, agent_id, context.lease_seconds);
                     });
  });

  router.add("POST", "/api/v1/jobs/{id}/release", agent, [&context](Request& request) {
    return as_holder(context, request, require_object(request), "release",
                     [](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                       return JobRepository::release(tx, id, agent_id);
                     });
  });

  router.add("POST", "/api/v1/jobs/{id}/stages", agent, [&context](Request& request) {
    json body = require_object(request);
    StageProgress progress = stage_progress(body);
    return as_holder(context, request, body, "record a stage",
                     [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                       return JobRepository::record_stage(tx, id, agent_id, context.lease_seconds, progress);
                     });
  });

  router.add("POST", "/api/v1/jobs/{id}/fail", agent, [&context](Request& request) {
    json body = require_object(request);
    std::string reason = body_string(body, "reason", true, 4096);
    std::string error = "agent \"" + body_string(body, "agent") + "\" could not run it: " + reason;
    return as_holder(context, request, body, "fail it",
                     [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                       if (!JobRepository::fail(tx, id, agent_id, error)) return false;
                       NotificationRepository::job_failed(tx, context.notifications, id);
                       return true;
                     });
  });

  router.add("POST", "/api/v1/jobs/{id}/report", Access::agent_reports(), [&context](Request& request) {
    std::int64_t job_id = request.id_param("id", "job");
    return ingest_report(context, request, job_id);
  });
}

}  // namespace kw::server
