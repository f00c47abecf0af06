#include "service/settings_service.hpp"

#include "errors.hpp"
#include "service/ownership.hpp"
#include "store/notification_outbox.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

using nlohmann::json;

json SettingsService::create_project(const Caller& caller, const std::string& name,
                                     const std::string& default_branch) {
  if (caller.projects)
    throw Forbidden("project_denied", "token \"" + caller.token_name +
                                          "\" is scoped to projects; only an unscoped admin makes projects");
  return with_transaction(pool_, [&](pqxx::work& tx) {
    auto id = RunRepository::create_project(tx, name, default_branch);
    if (!id) throw Conflict("project_exists", "project \"" + name + "\" exists");
    return SettingsRepository::get(tx, *id).to_json();
  });
}

json SettingsService::project(const Caller* caller, const std::string& name) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    std::int64_t id = owned_project(tx, caller, name);
    json project = SettingsRepository::get(tx, id).to_json();
    // How delivery to each of its targets fares (paused after repeated
    // failures): for its admins, who can act on it.
    if (caller && caller->scope == Scope::admin)
      project["notification_targets"] = NotificationOutbox::targets_json(
          tx, NotificationRepository::targets_of_project(tx, notifications_, id));
    return project;
  });
}

std::string SettingsService::audit(const Caller* caller, const std::string& name) {
  return with_transaction(
      pool_, [&](pqxx::work& tx) { return RunRepository::audit_json(tx, owned_project(tx, caller, name)); });
}

json SettingsService::update(const Caller& caller, const std::string& name, const json& changes) {
  caller.require_project(name);
  if (auto url = changes.find("webhook_url");
      url != changes.end() && url->is_string() && !notifications_.allow_private_webhooks) {
    if (std::string problem = private_host_problem(url->get<std::string>()); !problem.empty())
      throw Unprocessable("private_webhook", "webhook_url",
                          "must reach a public address: " + problem +
                              " (kw-server --allow-private-webhooks allows it, for an on-premises receiver)");
  }
  json settings = with_transaction(pool_, [&](pqxx::work& tx) {
    return SettingsRepository::update(tx, RunRepository::require_project(tx, name), changes).to_json();
  });
  reads_.committed(name);
  return settings;
}

}  // namespace kw::server
