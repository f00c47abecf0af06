#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

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

// An array of strings in `field`, each a `what`.
std::vector<std::string> strings_of(const json& body, const std::string& field, const std::string& what) {
  const json& array = body[field];
  if (!array.is_array()) throw Unprocessable("wrong_type", field, "must be an array of " + what);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string())
      throw Unprocessable("wrong_type", field + "[" + std::to_string(i) + "]", "must be a string");
    names.push_back(array[i].get<std::string>());
  }
  return names;
}

ClaimRequest claim_request_from(const json& body) {
  ClaimRequest ask;
  ask.agent = body_string(body, "agent");
  ask.host = body_string(body, "host", false);
  ask.version = body_string(body, "version", false);
  if (body.contains("gpus")) ask.gpus = strings_of(body, "gpus", "GPU model names");
  if (body.contains("projects")) ask.serves = strings_of(body, "projects", "project names");
  if (body.contains("gpu")) ask.gpu = gpu_of(body);
  if (body.contains("health")) ask.health = health_of(body);
  if (body.contains("can_profile")) {
    if (!body["can_profile"].is_boolean())
      throw Unprocessable("wrong_type", "can_profile", "must be true or false");
    ask.can_profile = body["can_profile"].get<bool>();
  }
  return ask;
}

}  // namespace

void add_agent_routes(Router& router, JobService& jobs) {
  router.add("GET", "/api/v1/agents", Access::read(),
             [&jobs](Request& request) { return Response::json_text(200, jobs.agents(request.reader())); });

  router.add("POST", "/api/v1/agents/claim", Access::of({Scope::agent}), [&jobs](Request& request) {
    std::optional<json> job = jobs.claim(*request.caller, claim_request_from(require_object(request)));
    if (job) return Response::json(200, *job);
    Response none;
    none.status = 204;
    none.content_type = "text/plain";
    return none;
  });
}

}  // namespace kw::server
