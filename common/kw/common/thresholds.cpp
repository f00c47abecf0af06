// A case's threshold and how kernelwatch.json and the server's settings
// give it.
#include "kw/common/json_reader.hpp"
#include "kw/common/run_report.hpp"

namespace kw::common {

using nlohmann::json;

std::optional<double> Thresholds::for_case(const std::string& name) const {
  auto own = cases.find(name);
  return own != cases.end() ? std::optional(own->second) : min_threshold;
}

json project_detection_json(const DetectionSettings& settings) {
  return {{"run_alpha", settings.run_alpha},
          {"min_threshold", settings.min_threshold},
          {"energy_threshold", settings.energy_threshold}};
}

DetectionSettings parse_project_detection(const json& value, const std::string& path) {
  JsonReader reader(value, path);
  DetectionSettings settings;
  auto fraction = [&reader](const char* key, double& into, double most) {
    if (auto given = reader.opt_number(key, 0)) {
      if (!(*given > 0 && *given <= most))
        JsonReader::fail(reader.child(key), "must be in (0, " + std::to_string(most) + "]");
      into = *given;
    }
  };
  fraction("run_alpha", settings.run_alpha, DetectionSettings::kMaxRunAlpha);
  fraction("min_threshold", settings.min_threshold, 1);
  fraction("energy_threshold", settings.energy_threshold, 1);
  reader.reject_unknown_keys();
  return settings;
}

CaseThreshold case_threshold(const std::string& name, const CaseThreshold& project,
                             const std::optional<Thresholds>& own, const std::string& commit,
                             const std::optional<Thresholds>& base, const std::string& base_commit) {
  auto of = [&](const std::optional<Thresholds>& thresholds, const std::string& at) {
    if (thresholds) {
      if (auto value = thresholds->for_case(name))
        return CaseThreshold{*value, "kernelwatch.json at " + at.substr(0, 12)};
    }
    return project;
  };
  CaseThreshold chosen = of(own, commit);
  if (!base) return chosen;
  CaseThreshold based = of(base, base_commit);
  if (based.value >= chosen.value) return chosen;
  based.source += " (the base's, stricter than " + chosen.source + ")";
  return based;
}

Thresholds parse_thresholds(const json& value, const std::string& path) {
  auto check = [](double threshold, const std::string& at) {
    if (!(threshold > 0 && threshold < 1)) JsonReader::fail(at, "must be between 0 and 1 (0.02 = 2%)");
    return threshold;
  };
  JsonReader reader(value, path);
  Thresholds thresholds;
  if (auto min = reader.opt_number("min_threshold", 0))
    thresholds.min_threshold = check(*min, reader.child("min_threshold"));
  if (const json* cases = reader.find("cases")) {
    JsonReader by_case(*cases, reader.child("cases"));
    for (const auto& [name, threshold] : cases->items()) {
      std::string at = by_case.child(name);
      if (name.empty() || name.size() > kMaxNameBytes) JsonReader::fail(at, "is not a case name");
      thresholds.cases[name] = check(JsonReader::as_number(threshold, at, 0), at);
    }
  }
  reader.reject_unknown_keys();
  return thresholds;
}

json to_json(const Thresholds& thresholds) {
  json out = json::object();
  if (thresholds.min_threshold) out["min_threshold"] = *thresholds.min_threshold;
  if (!thresholds.cases.empty()) out["cases"] = thresholds.cases;
  return out;
}

}  // namespace kw::common
