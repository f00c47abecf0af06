#include "service/settings_service.hpp"

#include <sstream>

#include "errors.hpp"
#include "kw/common/json_reader.hpp"
#include "model/webhook_address.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

double threshold_of(const json& value, const std::string& path) {
  if (!value.is_number()) throw Unprocessable("wrong_type", path, "must be a number");
  const double threshold = value.get<double>();
  if (!(threshold > 0 && threshold < 1))
    throw Unprocessable("out_of_range", path, "must be between 0 and 1 (0.02 = 2%)");
  return threshold;
}

// A string or null (clears the setting), checked by `problem`.
std::optional<std::string> nullable_text(const json& value, const std::string& field,
                                         std::string (*problem)(std::string_view), const std::string& what) {
  if (value.is_null()) return std::nullopt;
  if (!value.is_string()) throw Unprocessable("wrong_type", field, "must be " + what + " or null");
  const auto& text = value.get_ref<const std::string&>();
  if (std::string reason = problem(text); !reason.empty())
    throw Unprocessable("invalid_value", field, "must be " + what + " or null: " + reason);
  return text;
}

double run_alpha_of(const json& value, const std::string& key) {
  constexpr double kMax = common::DetectionSettings::kMaxRunAlpha;
  if (!value.is_number() || !(value.get<double>() > 0 && value.get<double>() <= kMax)) {
    std::ostringstream rule;
    rule << "must be a number above 0 and at most " << kMax
         << " (the chance that a run of an unchanged build flags any case; default "
         << common::DetectionSettings{}.run_alpha << ")";
    throw Unprocessable("out_of_range", key, rule.str());
  }
  return value.get<double>();
}

std::string inconclusive_gate_of(const json& value, const std::string& key) {
  if (!value.is_string() || (value != "pass" && value != "no-verdict" && value != "fail"))
    throw Unprocessable("invalid_value", key,
                        "must be \"no-verdict\" (the default: measure again), \"fail\" (a regression) or "
                        "\"pass\": what the gate answers for a run whose slowdown is inconclusive far past "
                        "its threshold");
  return value.get<std::string>();
}

double inconclusive_factor_of(const json& value, const std::string& key) {
  if (!value.is_number() || !(value.get<double>() >= 1 && value.get<double>() <= 1000))
    throw Unprocessable("out_of_range", key,
                        "must be a number from 1 to 1000: how many times its threshold an inconclusive "
                        "slowdown must be estimated at for inconclusive_gate to apply (default 3)");
  return value.get<double>();
}

[[noreturn]] void throw_no_project(const std::string& name) {
  throw NotFound("no_such_project", "no project \"" + name + "\"");
}

}  // namespace

SettingsChange parse_settings_change(const json& changes) {
  if (!changes.is_object()) throw Unprocessable("wrong_type", "settings", "must be a JSON object");
  SettingsChange change;
  for (const auto& [key, value] : changes.items()) {
    if (key == "default_branch") {
      if (!value.is_string()) throw Unprocessable("wrong_type", key, "must be a branch name");
      const auto& branch = value.get_ref<const std::string&>();
      if (std::string reason = name_problem(branch); !reason.empty())
        throw Unprocessable("invalid_value", key, reason);
      change.default_branch = branch;
    } else if (key == "min_threshold") {
      change.min_threshold = threshold_of(value, key);
    } else if (key == "energy_threshold") {
      change.energy_threshold = threshold_of(value, key);
    } else if (key == "run_alpha") {
      change.run_alpha = run_alpha_of(value, key);
    } else if (key == "case_thresholds") {
      if (!value.is_object())
        throw Unprocessable("wrong_type", key, "must be an object of case name -> number|null");
      for (const auto& [case_name, threshold] : value.items()) {
        if (std::string reason = name_problem(case_name); !reason.empty())
          throw Unprocessable("invalid_value", key, "a case name: " + reason);
        const std::string path = key + "." + case_name;
        change.case_thresholds[case_name] =
            threshold.is_null() ? std::nullopt : std::optional(threshold_of(threshold, path));
      }
    } else if (key == "inconclusive_gate") {
      change.inconclusive_gate = inconclusive_gate_of(value, key);
    } else if (key == "inconclusive_factor") {
      change.inconclusive_factor = inconclusive_factor_of(value, key);
    } else if (key == "github_repo") {
      change.github_repo = nullable_text(value, key, github_repo_problem, "\"owner/name\"");
    } else if (key == "webhook_url") {
      change.webhook_url = nullable_text(value, key, webhook_url_problem, "an http:// or https:// URL");
    } else if (key == "gitlab_project") {
      change.gitlab_project = nullable_text(value, key, gitlab_project_problem,
                                            "the project's numeric id or its path \"group/name\"");
    } else {
      throw Unprocessable(
          "unknown_field", key.size() <= common::kMaxNameBytes ? key : "settings",
          "unknown setting (default_branch, min_threshold, case_thresholds, energy_threshold, "
          "run_alpha, inconclusive_gate, inconclusive_factor, github_repo, gitlab_project, webhook_url)");
    }
  }
  return change;
}

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
