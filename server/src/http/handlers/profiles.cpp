#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

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

// The raw output of `ncu --csv --page raw` for one side, as the agent got it.
Response ncu_csv(ProfileService& profiles, const Request& request) {
  std::int64_t id = request.id_param("id", "profile");
  const std::string side = request.path_params.at("side");
  if (side != "base" && side != "head")
    throw NotFound("no_such_side", "a profile's sides are base and head, not \"" + side + "\"");
  auto csv = profiles.csv(request.reader(), id, side);
  if (!csv) throw NotFound("no_csv", "profile " + std::to_string(id) + " has no " + side + " CSV (yet)");
  Response response;
  response.content_type = "text/csv; charset=utf-8";
  response.body = std::move(*csv);
  return response;
}

// The holder of a profile job posts kw profile's summary and ncu's CSVs.
Response profile_result(ProfileService& profiles, const Request& request) {
  std::int64_t job_id = request.id_param("id", "job");
  json body = require_object(request);
  const std::string name = body_string(body, "agent");
  ProfileResult result;
  if (!body.contains("summary")) throw Unprocessable("missing_field", "summary", "is required");
  result.summary = std::move(body["summary"]);
  result.base_csv = csv_field(body, "base_csv");
  result.head_csv = csv_field(body, "head_csv");
  return Response::json(200, profiles.store_result(*request.caller, job_id, name, result));
}

}  // namespace

void add_profile_routes(Router& router, ProfileService& profiles) {
  // Queues one case of a run under Nsight Compute, in the run's commit and
  // (by default) the commit it was compared with.
  router.add("POST", "/api/v1/runs/{id}/profiles", Access::of({Scope::ci}), [&profiles](Request& request) {
    auto [created, profile] =
        profiles.queue(*request.caller, profile_request_from(require_object(request), request));
    return Response::json(created ? 201 : 200, profile);
  });

  router.add("GET", "/api/v1/runs/{id}/profiles", Access::read(), [&profiles](Request& request) {
    return Response::json_text(200, profiles.of_run(request.reader(), request.id_param("id", "run")));
  });

  router.add("GET", "/api/v1/profiles/{id}", Access::read(), [&profiles](Request& request) {
    return Response::json(200, profiles.get(request.reader(), request.id_param("id", "profile")));
  });

  router.add("GET", "/api/v1/profiles/{id}/ncu/{side}", Access::read(),
             [&profiles](Request& request) { return ncu_csv(profiles, request); });

  router.add("POST", "/api/v1/jobs/{id}/profile", Access::agent_reports(),
             [&profiles](Request& request) { return profile_result(profiles, request); });
}

}  // namespace kw::server
