// A project's settings: the detection thresholds, the default branch and
// where its notifications go, and the checks each value passes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kw/common/detection.hpp"

namespace kw::server {

// A settings request, checked as a whole before anything is written.
struct SettingsChange {
  std::optional<std::string> default_branch;
  std::optional<double> min_threshold, energy_threshold, run_alpha, inconclusive_factor;
  std::optional<std::string> inconclusive_gate;
  std::map<std::string, std::optional<double>> case_thresholds;  // nullopt: back to min_threshold
  std::optional<std::optional<std::string>> github_repo, webhook_url,
      gitlab_project;  // nullopt inside: cleared
};

struct ProjectSettings {
  std::int64_t id = 0;
  std::string name;
  std::string default_branch = "main";
  double min_threshold = common::DetectionSettings{}.min_threshold;
  std::map<std::string, double> case_thresholds;
  double run_alpha = common::DetectionSettings{}.run_alpha;
  std::string github_repo;  // "owner/name": commit statuses go there
  std::string webhook_url;
  std::string gitlab_project;  // id or "group/name": commit statuses go there
  // The smallest change of the candidate's joules per iteration flagged.
  double energy_threshold = common::DetectionSettings{}.energy_threshold;
  // A run that would pass but for inconclusive cases whose slowdown is
  // estimated at inconclusive_factor times their threshold or more: the gate
  // answers "no-verdict" (measure again), "fail" (a regression) or "pass"
  // (docs/detection.md, "Inconclusive cases and the gate").
  std::string inconclusive_gate = "no-verdict";
  double inconclusive_factor = 3;

  double min_threshold_for(const std::string& case_name) const;
  void apply(const SettingsChange& change);
  common::DetectionSettings detection() const;
  nlohmann::json to_json() const;
};

// The checks, as pure functions: each returns an empty string when `text`
// is acceptable, else the reason. They look at each byte once (no regular
// expression, no recursion), whatever the input's length.
std::string webhook_url_problem(std::string_view text);
std::string github_repo_problem(std::string_view text);
std::string gitlab_project_problem(std::string_view text);
std::string name_problem(std::string_view text);  // branch and case names

}  // namespace kw::server
