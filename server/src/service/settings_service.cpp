#include "service/settings_service.hpp"

#include "errors.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

[[noreturn]] void throw_no_project(const std::string& name) {
  throw NotFound("no_such_project", "no project \"" + name + "\"");
}

}  // namespace

json SettingsService::create_project(const Caller& caller, const std::string& name,
                                     const std::string& default_branch) {
  if (caller.projects)
    throw Forbidden("project_denied", "token \"" + caller.token_name +
                                          "\" is scoped to projects; only an unscoped admin makes projects");
  auto created = store_.create_project(name, default_branch);
  if (!created) throw Conflict("project_exists", "project \"" + name + "\" exists");
  return created->to_json();
}

json SettingsService::project(const Caller* caller, const std::string& name) {
  // The token is asked first: a project it does not name is not even said to exist.
  require_access(caller, name);
  auto settings = store_.settings(name);
  if (!settings) throw_no_project(name);
  json project = settings->to_json();
  // How delivery to each of its targets fares (paused after repeated
  // failures): for its admins, who can act on it.
  if (caller && caller->scope == Scope::admin)
    project["notification_targets"] = store_.notification_targets(*settings);
  return project;
}

json SettingsService::update(const Caller& caller, const std::string& name, const json& changes) {
  caller.require_project(name);
  const SettingsChange change = parse_settings_change(changes);
  if (change.webhook_url && *change.webhook_url && !notifications_.allow_private_webhooks) {
    if (std::string problem = private_host_problem(**change.webhook_url); !problem.empty())
      throw Unprocessable("private_webhook", "webhook_url",
                          "must reach a public address: " + problem +
                              " (kw-server --allow-private-webhooks allows it, for an on-premises receiver)");
  }
  auto settings = store_.update_settings(name, change);
  if (!settings) throw_no_project(name);
  return settings->to_json();
}

}  // namespace kw::server
