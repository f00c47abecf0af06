#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"

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

// A push's range: the bisect searches at most this many commits.
constexpr std::size_t kMaxRange = 1001;

std::string commit_field(const json& body, const std::string& field, bool required) {
  std::string commit = body_string(body, field, required);
  if ((required || !commit.empty()) && !common::is_commit_sha(commit))
    throw Unprocessable("invalid_value", field, "must be a 40-character lowercase hex SHA");
  return commit;
}

// `range`: the last commit measured before a push, then the pushed ones.
std::vector<std::string> range_field(const json& range, const std::string& commit) {
  if (!range.is_array() || range.size() < 2 || range.size() > kMaxRange)
    throw Unprocessable("invalid_value", "range",
                        "must be an array of 2 to " + std::to_string(kMaxRange) +
                            " commits: the last measured before the push, then the pushed ones");
  std::vector<std::string> commits;
  for (std::size_t i = 0; i < range.size(); ++i) {
    if (!range[i].is_string() || !common::is_commit_sha(range[i].get<std::string>()))
      throw Unprocessable("invalid_value", "range[" + std::to_string(i) + "]",
                          "must be a 40-character lowercase hex SHA");
    commits.push_back(range[i].get<std::string>());
  }
  if (commits.back() != commit)
    throw Unprocessable("inconsistent", "range", "must end with the job's commit");
  return commits;
}

// A job as POST /api/v1/jobs asks for it, checked field by field.
NewJob new_job_from(const json& body) {
  NewJob job;
  job.commit = commit_field(body, "commit", true);
  job.branch = body_string(body, "branch");
  if (std::string base = commit_field(body, "base_commit", false); !base.empty()) job.base_commit = base;
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
  if (body.contains("range")) job.range = range_field(body["range"], job.commit);
  return job;
}

Response create_job(JobService& jobs, const Request& request) {
  const json body = require_object(request);
  const std::string project = body_string(body, "project");
  common::check_project_name(project, "project");
  auto [created, job] = jobs.create(*request.caller, project, new_job_from(body));
  return Response::json(created ? 201 : 200, job);
}

// What the holder of a running job does to it, each answered with the job.
void add_holder_routes(Router& router, JobService& jobs) {
  const Access agent = Access::of({Scope::agent});
  router.add("POST", "/api/v1/jobs/{id}/heartbeat", agent, [&jobs](Request& request) {
    const json body = require_object(request);
    const std::int64_t id = request.id_param("id", "job");
    return Response::json(200, jobs.heartbeat(*request.caller, id, body_string(body, "agent")));
  });
  router.add("POST", "/api/v1/jobs/{id}/release", agent, [&jobs](Request& request) {
    const json body = require_object(request);
    const std::int64_t id = request.id_param("id", "job");
    return Response::json(200, jobs.release(*request.caller, id, body_string(body, "agent")));
  });
  router.add("POST", "/api/v1/jobs/{id}/stages", agent, [&jobs](Request& request) {
    const json body = require_object(request);
    const StageProgress progress = stage_progress(body);
    const std::int64_t id = request.id_param("id", "job");
    return Response::json(200, jobs.record_stage(*request.caller, id, body_string(body, "agent"), progress));
  });
  router.add("POST", "/api/v1/jobs/{id}/fail", agent, [&jobs](Request& request) {
    const json body = require_object(request);
    const std::string reason = body_string(body, "reason", true, 4096);
    const std::string name = body_string(body, "agent");
    return Response::json(200, jobs.fail(*request.caller, request.id_param("id", "job"), name, reason));
  });
}

}  // namespace

void add_bisect_routes(Router& router, BisectService& bisects) {
  router.add("GET", "/api/v1/bisects/{id}", Access::read(), [&bisects](Request& request) {
    return Response::json(200, bisects.get(request.reader(), request.id_param("id", "bisect")));
  });
  router.add("POST", "/api/v1/bisects/{id}/cancel", Access::of({Scope::ci}), [&bisects](Request& request) {
    return Response::json(200, bisects.cancel(*request.caller, request.id_param("id", "bisect")));
  });
}

void add_job_routes(Router& router, JobService& jobs) {
  add_holder_routes(router, jobs);

  router.add("POST", "/api/v1/jobs", Access::of({Scope::ci}),
             [&jobs](Request& request) { return create_job(jobs, request); });

  router.add("GET", "/api/v1/jobs/{id}", Access::read(), [&jobs](Request& request) {
    return Response::json(200, jobs.get(request.reader(), request.id_param("id", "job")));
  });
}

}  // namespace kw::server
