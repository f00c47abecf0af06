#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"
#include "store/token_repository.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

json token_json(const TokenInfo& info) {
  json out{{"id", info.id},
           {"name", info.name},
           {"scope", to_string(info.scope)},
           {"projects", info.projects ? json(*info.projects) : json(nullptr)},
           {"created_at", info.created_at},
           {"last_used_at", info.last_used_at.empty() ? json(nullptr) : json(info.last_used_at)},
           {"revoked_at", info.revoked_at.empty() ? json(nullptr) : json(info.revoked_at)}};
  return out;
}

// A project-scoped admin manages only tokens scoped to some of its own
// projects; an unscoped admin manages every token.
bool manages(const Caller& admin, const std::optional<std::vector<std::string>>& projects) {
  if (!admin.projects) return true;
  if (!projects) return false;
  return std::all_of(projects->begin(), projects->end(),
                     [&admin](const std::string& project) { return admin.may_access(project); });
}

}  // namespace

// Admin only: tokens are made, listed and revoked as `kw-server token` does.
void add_token_routes(Router& router, const HandlerContext& context) {
  const Access admin = Access::of({});

  router.add("POST", "/api/v1/tokens", admin, [&context](Request& request) {
    json body = require_object(request);
    std::string name = body_string(body, "name");
    std::string scope_text = body_string(body, "scope");
    auto scope = scope_from(scope_text);
    if (!scope) throw Unprocessable("invalid_value", "scope", "must be agent, ci, read or admin");
    std::optional<std::vector<std::string>> projects;
    if (auto it = body.find("projects"); it != body.end() && !it->is_null()) {
      if (!it->is_array() || it->empty())
        throw Unprocessable("wrong_type", "projects", "must be a non-empty array of project names, or null");
      projects.emplace();
      for (std::size_t i = 0; i < it->size(); ++i) {
        std::string path = "projects[" + std::to_string(i) + "]";
        projects->push_back(common::JsonReader::as_string((*it)[i], path, false, common::kMaxNameBytes));
        common::check_project_name(projects->back(), path);
      }
    }
    const Caller& maker = *request.caller;
    if (maker.projects && !projects) projects = maker.projects;  // no wider than the admin's own
    if (!manages(maker, projects))
      throw Forbidden("project_denied", "token \"" + maker.token_name +
                                            "\" makes tokens only for the projects it is scoped to");
    json answer = with_transaction(context.pool, [&](pqxx::work& tx) {
      std::string secret = TokenRepository::create(tx, name, *scope, projects);
      json created = token_json(TokenRepository::info(tx, secret));
      created["token"] = secret;
      return created;
    });
    return Response::json(201, answer);
  });

  router.add("GET", "/api/v1/tokens", admin, [&context](Request& request) {
    return Response::json(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                            json list = json::array();
                            for (const TokenInfo& info : TokenRepository::list(tx)) {
                              if (manages(*request.caller, info.projects)) list.push_back(token_json(info));
                            }
                            return list;
                          }));
  });

  router.add("DELETE", "/api/v1/tokens/{id}", admin, [&context](Request& request) {
    std::int64_t id = request.id_param("id", "token");
    int revoked = with_transaction(context.pool, [&](pqxx::work& tx) {
      const std::vector<TokenInfo> tokens = TokenRepository::list(tx);
      auto token =
          std::find_if(tokens.begin(), tokens.end(), [id](const TokenInfo& info) { return info.id == id; });
      // Another project's token is answered as if there were none.
      if (token == tokens.end() || !manages(*request.caller, token->projects)) return 0;
      return TokenRepository::revoke(tx, std::to_string(id));
    });
    if (revoked == 0) throw NotFound("no_such_token", "no active token " + std::to_string(id));
    return Response::json(200, {{"revoked", id}});
  });
}

}  // namespace kw::server
