#include "service/token_service.hpp"

#include <algorithm>

#include "errors.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

json token_json(const TokenInfo& info) {
  return {{"id", info.id},
          {"name", info.name},
          {"scope", to_string(info.scope)},
          {"projects", info.projects ? json(*info.projects) : json(nullptr)},
          {"created_at", info.created_at},
          {"last_used_at", info.last_used_at.empty() ? json(nullptr) : json(info.last_used_at)},
          {"revoked_at", info.revoked_at.empty() ? json(nullptr) : json(info.revoked_at)}};
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

json TokenService::create(const Caller& admin, const std::string& name, Scope scope,
                          std::optional<std::vector<std::string>> projects) {
  if (admin.projects && !projects) projects = admin.projects;  // no wider than the admin's own
  if (!manages(admin, projects))
    throw Forbidden("project_denied",
                    "token \"" + admin.token_name + "\" makes tokens only for the projects it is scoped to");
  auto [secret, info] = store_.create_token(name, scope, projects);
  json created = token_json(info);
  created["token"] = secret;
  return created;
}

json TokenService::list(const Caller& admin) {
  json list = json::array();
  for (const TokenInfo& info : store_.tokens()) {
    if (manages(admin, info.projects)) list.push_back(token_json(info));
  }
  return list;
}

void TokenService::revoke(const Caller& admin, std::int64_t token_id) {
  // A token's projects never change, so what is checked here is what is revoked.
  const std::vector<TokenInfo> tokens = store_.tokens();
  auto token = std::find_if(tokens.begin(), tokens.end(),
                            [token_id](const TokenInfo& info) { return info.id == token_id; });
  // Another project's token is answered as if there were none.
  if (token == tokens.end() || !manages(admin, token->projects) || !store_.revoke_token(token_id))
    throw NotFound("no_such_token", "no active token " + std::to_string(token_id));
}

}  // namespace kw::server
