#include "model/judging.hpp"

namespace kw::server {

using common::ChangeStatus;
using nlohmann::json;

namespace {

json test_json(const common::CaseTest& test, ChangeStatus status) {
  return {{"method", common::to_string(test.method)},
          {"status", common::to_string(status)},
          {"ratio", test.ratio},
          {"lower", test.lower},
          {"upper", test.upper},
          {"p_value", test.p_value},
          {"se", test.se},
          {"df", test.df},
          {"head_replicates", test.head_replicates},
          {"base_replicates", test.base_replicates},
          {"note", test.note}};
}

}  // namespace

json ComparisonRow::first_pass_json() const {
  if (!first_pass) return nullptr;
  json out = test_json(*first_pass, ChangeStatus::unchanged);
  out.erase("status");
  return out;
}

json ComparisonRow::to_json(const common::DetectionSettings& settings) const {
  json row{{"case", case_name},
           {"kind", kind},
           {"impl", impl},
           {"baseline_run_id", baseline ? json(baseline->run_id) : json(nullptr)},
           {"baseline_reason", reason_text()},
           {"status", common::to_string(status)},
           {"excluded_throttled", excluded_throttled},
           {"note", test.note},
           {"method", measured() ? json(common::to_string(test.method)) : json(nullptr)},
           {"first_pass", first_pass_json()}};
  if (measured()) {
    row.update({{"ratio", test.ratio},
                {"ratio_of_medians", ratio_of_medians},
                {"lower", test.lower},
                {"upper", test.upper},
                {"confidence", 1 - settings.run_alpha},
                {"p_value", test.p_value},
                {"threshold", min_threshold},
                {"threshold_source", threshold_source},
                {"head_noise", test.head_replicate_sd},
                {"base_noise", test.base_replicate_sd},
                {"head_samples", test.head_replicates},
                {"base_samples", test.base_replicates},
                {"se", test.se},
                {"df", test.df},
                {"detectable", detectable ? json(*detectable) : json(nullptr)}});
  }
  return row;
}

}  // namespace kw::server
