// A stand-in for PostgreSQL behind SettingsService and TokenService: the
// projects, their settings and the tokens in memory, as PgProjectStore keeps
// them (names unique, a scoped token makes its projects, a revoked token
// stays listed). Only for tests of the services' rules; the store's own SQL
// is tested on PostgreSQL (access_test.cpp, security_test.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "service/project_store.hpp"
#include "store/notification_outbox.hpp"

namespace kw::server::testing {

class InMemoryProjectStore final : public ProjectStore {
 public:
  std::optional<ProjectSettings> create_project(const std::string& name,
                                                const std::string& default_branch) override {
    std::lock_guard lock(mutex_);
    if (projects_.contains(name)) return std::nullopt;
    return make_project(name, default_branch);
  }

  std::optional<ProjectSettings> settings(const std::string& name) override {
    std::lock_guard lock(mutex_);
    auto found = projects_.find(name);
    if (found == projects_.end()) return std::nullopt;
    return found->second;
  }

  std::optional<ProjectSettings> update_settings(const std::string& name,
                                                 const SettingsChange& change) override {
    std::lock_guard lock(mutex_);
    auto found = projects_.find(name);
    if (found == projects_.end()) return std::nullopt;
    found->second.apply(change);
    committed.push_back(name);
    return found->second;
  }

  // A webhook's target, never failed: deliveries are not kept here.
  nlohmann::json notification_targets(const ProjectSettings& project) override {
    nlohmann::json targets = nlohmann::json::array();
    if (!project.webhook_url.empty())
      targets.push_back({{"target", NotificationOutbox::target_of("webhook", project.webhook_url)},
                         {"state", "ok"},
                         {"consecutive_failures", 0},
                         {"pending", 0}});
    return targets;
  }

  std::pair<std::string, TokenInfo> create_token(
      const std::string& name, Scope scope,
      const std::optional<std::vector<std::string>>& projects) override {
    std::lock_guard lock(mutex_);
    if (projects) {
      for (const std::string& project : *projects) {
        if (!projects_.contains(project)) make_project(project, "main");
      }
    }
    TokenInfo info;
    info.id = static_cast<std::int64_t>(tokens_.size()) + 1;
    info.name = name;
    info.scope = scope;
    info.created_at = "2026-11-28 00:00:00+00";
    info.projects = projects;
    tokens_.push_back(info);
    return {"kw_in_memory_" + std::to_string(info.id), info};
  }

  std::vector<TokenInfo> tokens() override {
    std::lock_guard lock(mutex_);
    return tokens_;
  }

  bool revoke_token(std::int64_t token_id) override {
    std::lock_guard lock(mutex_);
    auto token = std::find_if(tokens_.begin(), tokens_.end(),
                              [token_id](const TokenInfo& info) { return info.id == token_id; });
    if (token == tokens_.end() || !token->revoked_at.empty()) return false;
    token->revoked_at = "2026-11-28 00:00:01+00";
    return true;
  }

  // The projects whose settings changed, in order: the reads told of each.
  std::vector<std::string> committed;

 private:
  ProjectSettings& make_project(const std::string& name, const std::string& default_branch) {
    ProjectSettings& project = projects_[name];
    project.id = static_cast<std::int64_t>(projects_.size());
    project.name = name;
    project.default_branch = default_branch;
    return project;
  }

  std::mutex mutex_;
  std::map<std::string, ProjectSettings> projects_;
  std::vector<TokenInfo> tokens_;
};

}  // namespace kw::server::testing
