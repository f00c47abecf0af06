// PgProjectStore: the project store in PostgreSQL (service/project_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "access.hpp"
#include "model/notifications.hpp"
#include "service/project_store.hpp"
#include "store/database.hpp"
#include "store/read_routing.hpp"
#include "store/settings_repository.hpp"
#include "store/token_repository.hpp"

namespace kw::server {

class PgProjectStore final : public ProjectStore {
 public:
  PgProjectStore(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications)
      : pool_(pool), reads_(reads), notifications_(notifications) {}

  std::optional<ProjectSettings> create_project(const std::string& name,
                                                const std::string& default_branch) override;
  std::optional<ProjectSettings> settings(const std::string& name) override;
  std::optional<ProjectSettings> update_settings(const std::string& name,
                                                 const SettingsChange& change) override;
  nlohmann::json notification_targets(const ProjectSettings& project) override;
  std::pair<std::string, TokenInfo> create_token(
      const std::string& name, Scope scope, const std::optional<std::vector<std::string>>& projects) override;
  std::vector<TokenInfo> tokens() override;
  bool revoke_token(std::int64_t token_id) override;

 private:
  ConnectionPool& pool_;
  ReadRouting& reads_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
