// What SettingsService and TokenService read and write: projects, their
// settings and the API tokens, each call one transaction. kw-server keeps
// them in PostgreSQL (PgProjectStore); the services' rules are tested on an
// in-memory stand-in (server/tests/in_memory_store.hpp), as the
// history routes are on one of HistoryReads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "model/settings.hpp"
#include "model/tokens.hpp"

namespace kw::server {

class ProjectStore {
 public:
  virtual ~ProjectStore() = default;

  // nullopt: a project of that name exists.
  virtual std::optional<ProjectSettings> create_project(const std::string& name,
                                                        const std::string& default_branch) = 0;
  // nullopt: no such project.
  virtual std::optional<ProjectSettings> settings(const std::string& name) = 0;
  // The settings the change leaves (this server's next reads of the project
  // see them); nullopt: no such project.
  virtual std::optional<ProjectSettings> update_settings(const std::string& name,
                                                         const SettingsChange& change) = 0;
  // How delivery to each of the project's notification targets fares.
  virtual nlohmann::json notification_targets(const ProjectSettings& project) = 0;

  // The new token's secret (only its hash is kept) and what is kept of it.
  // A token scoped to projects makes those that do not exist.
  virtual std::pair<std::string, TokenInfo> create_token(
      const std::string& name, Scope scope, const std::optional<std::vector<std::string>>& projects) = 0;
  virtual std::vector<TokenInfo> tokens() = 0;
  // False: no such token, or revoked already.
  virtual bool revoke_token(std::int64_t token_id) = 0;
};

}  // namespace kw::server
