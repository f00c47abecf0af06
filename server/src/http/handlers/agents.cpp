#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "notify/notifier.hpp"
#include "store/job_repository.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// What a claimed job's cases are judged with where kernelwatch.json sets no
// threshold: the agent screens the first pass of an A/B by it.
json project_thresholds(pqxx::work& tx, const std::string& project) {
  const ProjectSettings settings = SettingsRepository::get(tx, RunRepository::require_project(tx, project));
  return {{"min_threshold", settings.min_threshold}, {"cases", settings.case_thresholds}};
}

// A claim's `gpu`: the one GPU a worker is pinned to.
json gpu_of(const json& body) {
  const json& gpu = body["gpu"];
  if (!gpu.is_object()) throw Unprocessable("wrong_type", "gpu", "must be an object {uuid, index, model}");
  if (!gpu.contains("uuid") || !gpu["uuid"].is_string() || gpu["uuid"].get<std::string>().empty())
    throw Unprocessable("missing_field", "gpu.uuid", "must be the GPU's UUID");
  if (!gpu.contains("index") || !gpu["index"].is_number_integer() || gpu["index"].get<std::int64_t>() < 0)
    throw Unprocessable("wrong_type", "gpu.index", "must be the GPU's index, an integer >= 0");
  if (!gpu.contains("model") || !gpu["model"].is_string())
    throw Unprocessable("missing_field", "gpu.model", "must be the GPU's model name");
  return {{"uuid", gpu["uuid"]}, {"index", gpu["index"]}, {"model", gpu["model"]}};
}

// A claim's `health`: the worker's last health check of its GPU.
json health_of(const json& body) {
  const json& health = body["health"];
  if (!health.is_object()) throw Unprocessable("wrong_type", "health", "must be an object {healthy, checks}");
  if (!health.contains("healthy") || !health["healthy"].is_boolean())
    throw Unprocessable("missing_field", "health.healthy", "must be true or false");
  if (!health.contains("checks") || !health["checks"].is_array())
    throw Unprocessable("missing_field", "health.checks", "must be an array of {name, passed, message}");
  json checks = json::array();
  for (std::size_t i = 0; i < health["checks"].size(); ++i) {
    const json& check = health["checks"][i];
    const std::string at = "health.checks[" + std::to_string(i) + "]";
    if (!check.is_object() || !check.contains("name") || !check["name"].is_string() ||
        !check.contains("passed") || !check["passed"].is_boolean() ||
        (check.contains("message") && !check["message"].is_string()))
      throw Unprocessable("wrong_type", at, "must be {name: string, passed: bool, message: string}");
    checks.push_back(
        {{"name", check["name"]}, {"passed", check["passed"]}, {"message", check.value("message", "")}});
  }
  return {{"healthy", health["healthy"]}, {"checks", checks}};
}

}  // namespace

void add_agent_routes(Router& router, const HandlerContext& context) {
  // Every agent (each worker of a multi-GPU host is one), its GPU, health
  // and the job it runs; jobs of projects the caller cannot read are left out.
  router.add("GET", "/api/v1/agents", Access::read(), [&context](Request& request) {
    std::optional<std::vector<std::string>> only;
    if (request.caller) only = request.caller->projects;
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 return JobRepository::agents_json(tx, only);
                               }));
  });

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
    std::optional<json> gpu, health;
    if (body.contains("gpu")) gpu = gpu_of(body);
    if (body.contains("health")) health = health_of(body);
    // An agent that can run Nsight Compute (ncu) on its GPU takes profile jobs too.
    bool can_profile = false;
    if (body.contains("can_profile")) {
      if (!body["can_profile"].is_boolean())
        throw Unprocessable("wrong_type", "can_profile", "must be true or false");
      can_profile = body["can_profile"].get<bool>();
    }
    auto job = with_transaction(context.pool, [&](pqxx::work& tx) -> std::optional<json> {
      std::int64_t agent_id = JobRepository::bind_agent(tx, name, *request.caller, host, version, gpus);
      JobRepository::record_worker(tx, agent_id, gpu, health, can_profile);
      for (std::int64_t failed : JobRepository::requeue_expired(tx).failed)
        NotificationRepository::job_failed(tx, context.notifications, failed);
      // A GPU that failed its health check measures nothing until it passes.
      if (health && !(*health)["healthy"].get<bool>()) return std::nullopt;
      auto job_id = JobRepository::claim(tx, agent_id, gpus, context.lease_seconds, projects, can_profile);
      if (!job_id) return std::nullopt;
      std::optional<json> claimed = JobRepository::get(tx, *job_id);
      if (claimed) (*claimed)["project_thresholds"] = project_thresholds(tx, (*claimed)["project"]);
      return claimed;
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
