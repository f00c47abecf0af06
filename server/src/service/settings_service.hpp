// Projects: made, read and configured.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "model/notifications.hpp"
#include "service/project_store.hpp"

namespace kw::server {

// {"default_branch"?, "min_threshold"?, "case_thresholds"?: {case: number|null}, "run_alpha"?,
//  "energy_threshold"?, "github_repo"?: "owner/name"|null, "webhook_url"?: url|null,
//  "gitlab_project"?: id|"group/name"|null, "inconclusive_gate"?: "pass"|"no-verdict"|"fail",
//  "inconclusive_factor"?: number >= 1}, every value checked: Unprocessable (422) naming the
// first field that is wrong.
SettingsChange parse_settings_change(const nlohmann::json& changes);

class SettingsService {
 public:
  SettingsService(ProjectStore& store, const NotifierOptions& notifications)
      : store_(store), notifications_(notifications) {}

  // Only an unscoped admin makes projects. Conflict ("project_exists").
  nlohmann::json create_project(const Caller& caller, const std::string& name,
                                const std::string& default_branch);
  // Its settings; for an admin, how delivery to each notification target fares.
  nlohmann::json project(const Caller* caller, const std::string& name);
  // Unprocessable (422) naming the first field that is wrong; nothing is
  // written then. A webhook must reach a public address unless the server
  // allows private ones.
  nlohmann::json update(const Caller& caller, const std::string& name, const nlohmann::json& changes);

 private:
  ProjectStore& store_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
