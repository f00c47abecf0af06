#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// `projects`: a non-empty array of project names, or null (every project).
std::optional<std::vector<std::string>> projects_field(const json& body) {
  auto it = body.find("projects");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_array() || it->empty())
    throw Unprocessable("wrong_type", "projects", "must be a non-empty array of project names, or null");
  std::vector<std::string> projects;
  for (std::size_t i = 0; i < it->size(); ++i) {
    std::string path = "projects[" + std::to_string(i) + "]";
    projects.push_back(common::JsonReader::as_string((*it)[i], path, false, common::kMaxNameBytes));
    common::check_project_name(projects.back(), path);
  }
  return projects;
}

Response create_token(TokenService& tokens, const Request& request) {
  json body = require_object(request);
  std::string name = body_string(body, "name");
  auto scope = scope_from(body_string(body, "scope"));
  if (!scope) throw Unprocessable("invalid_value", "scope", "must be agent, ci, read or admin");
  return Response::json(201, tokens.create(*request.caller, name, *scope, projects_field(body)));
}

}  // namespace

// Admin only: tokens are made, listed and revoked as `kw-server token` does.
void add_token_routes(Router& router, TokenService& tokens) {
  const Access admin = Access::of({});

  router.add("POST", "/api/v1/tokens", admin,
             [&tokens](Request& request) { return create_token(tokens, request); });

  router.add("GET", "/api/v1/tokens", admin,
             [&tokens](Request& request) { return Response::json(200, tokens.list(*request.caller)); });

  router.add("DELETE", "/api/v1/tokens/{id}", admin, [&tokens](Request& request) {
    std::int64_t id = request.id_param("id", "token");
    tokens.revoke(*request.caller, id);
    return Response::json(200, {{"revoked", id}});
  });
}

}  // namespace kw::server
