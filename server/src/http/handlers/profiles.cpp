#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"
#include "notify/notifier.hpp"
#include "store/job_repository.hpp"
#include "store/profile_repository.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// A profile read: 404 when there is none, 403 for another project's.
json readable_profile(pqxx::work& tx, const Request& request, std::int64_t id) {
  auto profile = ProfileRepository::get(tx, id);
  if (!profile) throw NotFound("no_such_profile", "no profile " + std::to_string(id));
  check_project(request, (*profile)["project"].get<std::string>());
  return *profile;
}

std::string csv_field(const json& body, const std::string& field) {
  if (!body.contains(field)) return {};
  if (!body[field].is_string()) throw Unprocessable("wrong_type", field, "must be a string (ncu's CSV)");
  return body[field].get<std::string>();
}

// A profile as POST /api/v1/runs/{id}/profiles asks for it, checked field
// by field.
ProfileRequest profile_request_from(const json& body, const Request& request) {
  ProfileRequest ask;
  ask.run_id = request.id_param("id", "run");
  ask.case_name = body_string(body, "case", true, common::kMaxTextBytes);
  const std::string base = body_string(body, "base_commit", false);
  if (!base.empty()) {
    if (!common::is_commit_sha(base))
      throw Unprocessable("invalid_value", "base_commit", "must be a 40-character lowercase hex SHA");
    ask.base_commit = base;
  }
  if (auto launches = body_integer(body, "launch_count", 1, 1000))
    ask.launch_count = static_cast<int>(*launches);
  ask.kernel_regex = body_string(body, "kernel", false, 1000);
  if (body.contains("again")) {
    if (!body["again"].is_boolean()) throw Unprocessable("wrong_type", "again", "must be true or false");
    ask.again = body["again"].get<bool>();
  }
  return ask;
}

}  // namespace

void add_profile_routes(Router& router, const HandlerContext& context) {
  const Access ci = Access::of({Scope::ci});

  // Queues one case of a run under Nsight Compute, in the run's commit and
  // (by default) the commit it was compared with.
  router.add("POST", "/api/v1/runs/{id}/profiles", ci, [&context](Request& request) {
    json body = require_object(request);
    ProfileRequest ask = profile_request_from(body, request);
    ask.requested_by = request.caller->token_name;
    ask.max_attempts = context.max_attempts;
    auto [created, profile] = with_transaction(context.pool, [&](pqxx::work& tx) {
      auto project = RunRepository::project_of_run(tx, ask.run_id);
      if (!project) throw NotFound("no_such_run", "no run " + std::to_string(ask.run_id));
      request.caller->require_project(*project);
      auto [id, was_created] = ProfileRepository::queue(tx, ask);
      json document = *ProfileRepository::get(tx, id);
      if (document["state"] == "queued" &&
          !ProfileRepository::profiler_for(tx, document["gpu_model"].get<std::string>()))
        document["note"] = "no agent of " + document["gpu_model"].get<std::string>() +
                           " with Nsight Compute (ncu) was seen within a day; the profile waits for one";
      return std::make_pair(was_created, document);
    });
    return Response::json(created ? 201 : 200, profile);
  });

  router.add("GET", "/api/v1/runs/{id}/profiles", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "run");
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 auto project = RunRepository::project_of_run(tx, id);
                                 if (!project) throw NotFound("no_such_run", "no run " + std::to_string(id));
                                 check_project(request, *project);
                                 return ProfileRepository::of_run_json(tx, id);
                               }));
  });

  router.add("GET", "/api/v1/profiles/{id}", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "profile");
    return Response::json(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                            return readable_profile(tx, request, id);
                          }));
  });

  // The raw output of `ncu --csv --page raw` for one side, as the agent got it.
  router.add("GET", "/api/v1/profiles/{id}/ncu/{side}", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "profile");
    const std::string side = request.path_params.at("side");
    if (side != "base" && side != "head")
      throw NotFound("no_such_side", "a profile's sides are base and head, not \"" + side + "\"");
    auto csv = with_transaction(context.pool, [&](pqxx::work& tx) {
      readable_profile(tx, request, id);
      return ProfileRepository::csv(tx, id, side);
    });
    if (!csv) throw NotFound("no_csv", "profile " + std::to_string(id) + " has no " + side + " CSV (yet)");
    Response response;
    response.content_type = "text/csv; charset=utf-8";
    response.body = std::move(*csv);
    return response;
  });

  // The holder of a profile job posts kw profile's summary and ncu's CSVs;
  // a retry of a result already stored is answered as before.
  router.add("POST", "/api/v1/jobs/{id}/profile", Access::agent_reports(), [&context](Request& request) {
    std::int64_t job_id = request.id_param("id", "job");
    json body = require_object(request);
    const std::string name = body_string(body, "agent");
    ProfileResult result;
    if (!body.contains("summary")) throw Unprocessable("missing_field", "summary", "is required");
    result.summary = std::move(body["summary"]);
    result.base_csv = csv_field(body, "base_csv");
    result.head_csv = csv_field(body, "head_csv");
    return Response::json(
        200, with_transaction(context.pool, [&](pqxx::work& tx) {
          auto hold = JobRepository::lock(tx, job_id);
          if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
          const json job = *JobRepository::get(tx, job_id);
          request.caller->require_project(job["project"].get<std::string>());
          std::int64_t agent_id = JobRepository::registered_agent(tx, name, *request.caller);
          if (hold->kind != "profile")
            throw Conflict("not_a_profile_job",
                           "job " + std::to_string(job_id) +
                               " is a measurement: its report goes to POST /api/v1/jobs/" +
                               std::to_string(job_id) + "/report");
          const std::int64_t profile_id = job["profile"]["id"];
          if (hold->state == "done") return readable_profile(tx, request, profile_id);
          if (hold->state != "running" || hold->agent_id != agent_id)
            throw Conflict("job_not_held", "agent \"" + name + "\" does not hold job " +
                                               std::to_string(job_id) + " (state " + hold->state + ")");
          ProfileRepository::store(tx, job_id, result);
          NotificationRepository::profile_ended(tx, context.notifications, job_id);
          return *ProfileRepository::get(tx, profile_id);
        }));
  });
}

}  // namespace kw::server
