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
