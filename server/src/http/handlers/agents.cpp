#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "store/job_repository.hpp"

namespace kw::server {

using nlohmann::json;

void add_agent_routes(Router& router, const HandlerContext& context) {
  // An agent claims only jobs of the projects its token names and, when it
  // says which it serves (`projects`: those it can fetch), of those alone:
  // a job it cannot run is never claimed, dropped and left to expire.
  router.add("POST", "/api/v1/agents/claim", Access::of({Scope::agent}), [&context](Request& request) {
    json body = require_object(request);
    std::string name = body_string(body, "agent");
    std::string host = body_string(body, "host", false);
    std::string version = body_string(body, "version", false);
    json gpus = body.value("gpus", json::array());
    if (!gpus.is_array()) throw Unprocessable("wrong_type", "gpus", "must be an array of GPU model names");
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].is_string())
        throw Unprocessable("wrong_type", "gpus[" + std::to_string(i) + "]", "must be a string");
    }
    std::optional<std::vector<std::string>> projects = request.caller->projects;
    if (const auto served = body.find("projects"); served != body.end()) {
      if (!served->is_array())
        throw Unprocessable("wrong_type", "projects", "must be an array of project names");
      std::vector<std::string> names;
      for (std::size_t i = 0; i < served->size(); ++i) {
        const json& project = (*served)[i];
        if (!project.is_string())
          throw Unprocessable("wrong_type", "projects[" + std::to_string(i) + "]", "must be a string");
        const std::string name_of = project.get<std::string>();
        if (!projects || std::find(projects->begin(), projects->end(), name_of) != projects->end())
          names.push_back(name_of);
      }
      projects = std::move(names);
    }
    auto job = with_transaction(context.pool, [&](pqxx::work& tx) -> std::optional<json> {
      std::int64_t agent_id = JobRepository::bind_agent(tx, name, *request.caller, host, version, gpus);
      JobRepository::requeue_expired(tx);
      auto job_id = JobRepository::claim(tx, agent_id, gpus, context.lease_seconds, projects);
      if (!job_id) return std::nullopt;
      return JobRepository::get(tx, *job_id);
    });
    if (!job) {
      Response response;
      response.status = 204;
      response.content_type = "text/plain";
      return response;
    }
    (*job)["lease_seconds"] = context.lease_seconds;
    return Response::json(200, *job);
  });
}

}  // namespace kw::server
