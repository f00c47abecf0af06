#include "store/pg_project_store.hpp"

#include "store/notification_repository.hpp"

#include "store/notification_outbox.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

std::optional<ProjectSettings> PgProjectStore::create_project(const std::string& name,
                                                              const std::string& default_branch) {
  return with_transaction(pool_, [&](pqxx::work& tx) -> std::optional<ProjectSettings> {
    auto id = RunRepository::create_project(tx, name, default_branch);
    if (!id) return std::nullopt;
    return SettingsRepository::get(tx, *id);
  });
}

std::optional<ProjectSettings> PgProjectStore::settings(const std::string& name) {
  return with_transaction(pool_, [&](pqxx::work& tx) -> std::optional<ProjectSettings> {
    auto id = RunRepository::find_project(tx, name);
    if (!id) return std::nullopt;
    return SettingsRepository::get(tx, *id);
  });
}

std::optional<ProjectSettings> PgProjectStore::update_settings(const std::string& name,
                                                               const SettingsChange& change) {
  auto updated = with_transaction(pool_, [&](pqxx::work& tx) -> std::optional<ProjectSettings> {
    auto id = RunRepository::find_project(tx, name);
    if (!id) return std::nullopt;
    return SettingsRepository::update(tx, *id, change);
  });
  if (updated) reads_.committed(name);
  return updated;
}

nlohmann::json PgProjectStore::notification_targets(const ProjectSettings& project) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    return NotificationOutbox::targets_json(
        tx, NotificationRepository::targets_of_project(tx, notifications_, project.id));
  });
}

std::pair<std::string, TokenInfo> PgProjectStore::create_token(
    const std::string& name, Scope scope, const std::optional<std::vector<std::string>>& projects) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    std::string secret = TokenRepository::create(tx, name, scope, projects);
    TokenInfo info = TokenRepository::info(tx, secret);
    return std::make_pair(std::move(secret), std::move(info));
  });
}

std::vector<TokenInfo> PgProjectStore::tokens() {
  return with_transaction(pool_, [&](pqxx::work& tx) { return TokenRepository::list(tx); });
}

bool PgProjectStore::revoke_token(std::int64_t token_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
           return TokenRepository::revoke(tx, std::to_string(token_id));
         }) > 0;
}

}  // namespace kw::server
