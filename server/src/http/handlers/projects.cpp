// A project: made, read and configured (its history: history.cpp).
#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"

namespace kw::server {

using nlohmann::json;

void add_project_routes(Router& router, SettingsService& settings) {
  const Access admin = Access::of({});

  router.add("POST", "/api/v1/projects", admin, [&settings](Request& request) {
    json body = require_object(request);
    std::string name = body_string(body, "name");
    common::check_project_name(name, "name");
    std::string default_branch = body_string(body, "default_branch", false);
    if (default_branch.empty()) default_branch = "main";
    return Response::json(201, settings.create_project(*request.caller, name, default_branch));
  });

  router.add("GET", "/api/v1/projects/{project}", Access::read(), [&settings](Request& request) {
    return Response::json(200, settings.project(request.reader(), request.param("project")));
  });

  router.add("PUT", "/api/v1/projects/{project}/settings", admin, [&settings](Request& request) {
    const json changes = require_object(request);
    return Response::json(200, settings.update(*request.caller, request.param("project"), changes));
  });
}

}  // namespace kw::server
