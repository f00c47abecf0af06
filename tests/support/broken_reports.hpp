// Broken variants of tests/data/example-run.json, each with the message the
// validator must give. Shared by the library test (common/) and the command
// test (`kw validate`, agent/).
#pragma once

#include <fstream>
#include <functional>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::testing {

struct BrokenReport {
  std::string name;  // test name suffix
  std::function<void(nlohmann::json&)> mutate;
  std::string expected_message;  // exact what() of the ValidationError
  // When the report goes through JSON text first: text cannot hold an infinity
  // (nlohmann writes it as null), so that variant reads differently there.
  std::string expected_text_message = {};

  const std::string& text_message() const {
    return expected_text_message.empty() ? expected_message : expected_text_message;
  }
};

// gtest prints the parameter by name instead of its bytes.
inline void PrintTo(const BrokenReport& report, std::ostream* out) {
  *out << report.name;
}

inline nlohmann::json load_example_report(const std::string& data_dir) {
  std::ifstream in(data_dir + "/example-run.json");
  if (!in) throw std::runtime_error("cannot open " + data_dir + "/example-run.json");
  return nlohmann::json::parse(in);
}

// The run's head and its stages.
inline std::vector<BrokenReport> broken_heads() {
  using nlohmann::json;
  return {
      {"UnknownSchema", [](json& r) { r["schema"] = "kernelwatch.run/2"; },
       "schema: unknown schema version \"kernelwatch.run/2\" (this build reads \"kernelwatch.run/1\")"},
      {"MissingProject", [](json& r) { r.erase("project"); }, "project: is required"},
      {"ShortCommit", [](json& r) { r["commit"] = "3f2a9c1"; },
       "commit: must be a 40-character lowercase hex commit SHA, got \"3f2a9c1\""},
      {"NonHexCommit", [](json& r) { r["commit"] = "zz2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a"; },
       "commit: must be a 40-character lowercase hex commit SHA, got "
       "\"zz2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a\""},
      {"BaseCommitWrongLength", [](json& r) { r["base_commit"] = std::string(41, 'a'); },
       "base_commit: must be a 40-character lowercase hex commit SHA, got \"" + std::string(41, 'a') + "\""},
      {"MistypedBranch", [](json& r) { r["branch"] = 7; }, "branch: must be a string, got integer"},
      {"ShortTree",
       [](json& r) {
         r["git"] = {{"tree", "4b825dc"}};
       },
       "git.tree: must be a 40-character lowercase hex commit SHA, got \"4b825dc\""},
      {"BadParent",
       [](json& r) {
         r["git"] = {{"tree", std::string(40, 'a')}, {"parents", {"HEAD~1"}}};
       },
       "git.parents[0]: must be a 40-character lowercase hex commit SHA"},
      {"CommitTimeNotRfc3339",
       [](json& r) {
         r["git"] = {{"tree", std::string(40, 'a')}, {"committed_at", "yesterday"}};
       },
       "git.committed_at: must be an RFC 3339 timestamp, got \"yesterday\""},
      {"ThresholdOfHundredPercent",
       [](json& r) {
         r["thresholds"] = {{"min_threshold", 1}};
       },
       "thresholds.min_threshold: must be between 0 and 1 (0.02 = 2%)"},
      {"CaseThresholdNegative",
       [](json& r) {
         r["thresholds"] = {{"cases", {{"x", -0.1}}}};
       },
       "thresholds.cases.x: must not be negative"},
      {"UnknownThresholdKey",
       [](json& r) {
         r["thresholds"] = {{"minimum", 0.1}};
       },
       "thresholds.minimum: unknown field"},
      {"BaseThresholdsWithoutBase",
       [](json& r) {
         r.erase("base_commit");
         r["base_thresholds"] = json::object();
       },
       "base_thresholds: needs base_commit: they are that commit's"},
      {"UnknownStageName", [](json& r) { r["stages"][2]["name"] = "launch"; },
       "stages[2].name: unknown stage \"launch\" (expected build, load, launch_geometry, correctness, "
       "quick_bench or full_bench)"},
      {"UnknownStageStatus", [](json& r) { r["stages"][0]["status"] = "ok"; },
       "stages[0].status: unknown status \"ok\" (expected passed, failed or skipped)"},
      {"FailedStageWithoutMessage",
       [](json& r) {
         r["stages"][1]["status"] = "failed";
         r["stages"][1]["message"] = "";
       },
       "stages[1].message: must say why when the stage is failed"},
      {"DuplicateStage", [](json& r) { r["stages"][1]["name"] = "build"; },
       "stages[1].name: stage \"build\" appears twice"},
      {"NegativeDuration", [](json& r) { r["stages"][3]["duration_ms"] = -5; },
       "stages[3].duration_ms: must not be negative"},
  };
}

// Measurements, launches, correctness, timestamps and the device.
inline std::vector<BrokenReport> broken_measurements() {
  using nlohmann::json;
  return {
      {"NegativeSample", [](json& r) { r["cases"][3]["measurements"][0]["samples_ns"][7] = -1.0; },
       "cases[3].measurements[0].samples_ns[7]: must be finite and > 0"},
      {"ZeroSample", [](json& r) { r["cases"][1]["measurements"][2]["samples_ns"][0] = 0; },
       "cases[1].measurements[2].samples_ns[0]: must be finite and > 0"},
      {"NonFiniteSample",
       [](json& r) {
         r["cases"][0]["measurements"][1]["samples_ns"][3] = std::numeric_limits<double>::infinity();
       },
       "cases[0].measurements[1].samples_ns[3]: must be finite and > 0",
       "cases[0].measurements[1].samples_ns[3]: must be a number, got null"},
      {"StringSample", [](json& r) { r["cases"][0]["measurements"][0]["samples_ns"][2] = "41000"; },
       "cases[0].measurements[0].samples_ns[2]: must be a number, got string"},
      {"EmptySamples", [](json& r) { r["cases"][2]["measurements"][0]["samples_ns"] = json::array(); },
       "cases[2].measurements[0].samples_ns: must hold at least one sample"},
      {"WrongMedian", [](json& r) { r["cases"][0]["measurements"][0]["median_ns"] = 1.0; },
       ""},  // message carries the computed median; checked by prefix below
      {"BadImpl", [](json& r) { r["cases"][0]["measurements"][1]["impl"] = "cudnn"; },
       "cases[0].measurements[1].impl: must be \"candidate\" or \"baseline:<name>\", got \"cudnn\""},
      {"DuplicateImpl", [](json& r) { r["cases"][0]["measurements"][2]["impl"] = "baseline:cudnn-sdpa"; },
       "cases[0].measurements[2].impl: duplicate implementation \"baseline:cudnn-sdpa\" in this case"},
      {"DuplicateCaseName", [](json& r) { r["cases"][2]["name"] = r["cases"][0]["name"]; },
       "cases[2].name: duplicate case name \"attention.fwd/fp16/b16_h16_s1024_d128\""},
      {"LaunchBlockTwoDims",
       [](json& r) {
         r["cases"][1]["launches"][0]["block"] = json::array({128, 1});
       },
       "cases[1].launches[0].block: must be an array of 3 positive integers"},
      {"LaunchGridZero", [](json& r) { r["cases"][1]["launches"][0]["grid"][1] = 0; },
       "cases[1].launches[0].grid[1]: must be >= 1"},
      {"FractionalRegisters", [](json& r) { r["cases"][0]["launches"][0]["registers"] = 16.5; },
       "cases[0].launches[0].registers: must be an integer, got 16.5"},
      {"CorrectnessPassedWithNaN", [](json& r) { r["cases"][0]["correctness"]["nonfinite"] = 3; },
       "cases[0].correctness.passed: cannot be true with non-finite outputs"},
      {"NegativeGpuSeconds", [](json& r) { r["gpu_seconds"] = -1.5; }, "gpu_seconds: must not be negative"},
      {"NegativeStageGpuSeconds", [](json& r) { r["stages"][5]["gpu_seconds"] = -2.0; },
       "stages[5].gpu_seconds: must not be negative"},
      {"BadTimestamp", [](json& r) { r["started_at"] = "yesterday"; },
       "started_at: must be an RFC 3339 timestamp from 1970 on, got \"yesterday\""},
      {"FinishedBeforeStarted", [](json& r) { r["finished_at"] = "2026-11-21T09:59:59Z"; },
       "finished_at: is before started_at"},
      {"UnknownField", [](json& r) { r["cases"][0]["measurements"][0]["sample_ns"] = json::array({1}); },
       "cases[0].measurements[0].sample_ns: unknown field"},
      {"ThrottledIndexOutOfRange",
       [](json& r) { r["cases"][1]["measurements"][0]["throttled_samples"] = {99}; },
       "cases[1].measurements[0].throttled_samples[0]: sample index 99 is past the end of samples_ns"},
      {"ClockPerSampleMissing",
       [](json& r) {
         json& m = r["cases"][1]["measurements"][0];
         m["samples_ns"] = {100.0, 101.0, 102.0};
         m["median_ns"] = 101.0;
         m.erase("throttled_samples");
         m["sm_mhz"] = {1980.0, 1965.0};
       },
       "cases[1].measurements[0].sm_mhz: must hold one clock per sample (3), got 2"},
      {"ClockNotPositive",
       [](json& r) {
         json& m = r["cases"][0]["measurements"][0];
         m["sm_mhz"] = std::vector<double>(m["samples_ns"].size(), 1980.0);
         m["sm_mhz"][3] = 0.0;
       },
       "cases[0].measurements[0].sm_mhz[3]: must be a clock in MHz, > 0 and <= 100000"},
      {"UnknownReplicateLocation",
       [](json& r) { r["cases"][0]["measurements"][0]["replicate_location"] = "min"; },
       "cases[0].measurements[0].replicate_location: must be \"trimmed_mean\" or \"minimum\", got \"min\""},
      {"MissingDeviceWithMeasurements", [](json& r) { r.erase("device"); },
       "device: is required when any case has measurements"},
      {"BadComputeCapability", [](json& r) { r["device"]["compute_capability"] = "sm_90"; },
       "device.compute_capability: must look like \"9.0\", got \"sm_90\""},
      {"GpuWithoutComputeCapability", [](json& r) { r["device"].erase("compute_capability"); },
       "device.compute_capability: is required"},
      {"UnknownDeviceKind", [](json& r) { r["device"]["kind"] = "tpu"; },
       "device.kind: must be \"gpu\" or \"cpu\", got \"tpu\""},
      {"StagesOutOfOrder", [](json& r) { std::swap(r["stages"][0], r["stages"][1]); },
       "stages[1].name: stage \"build\" is out of pipeline order (after \"load\")"},
      {"NotAnObject",
       [](json& r) {
         r = json::array({1, 2});
       },
       "report: must be an object, got array"},
  };
}

// Reports that each break one rule of docs/run-report.md, with the error
// kw validate and kw-server give.
inline std::vector<BrokenReport> broken_reports() {
  std::vector<BrokenReport> all = broken_heads();
  for (BrokenReport& broken : broken_measurements()) all.push_back(std::move(broken));
  return all;
}

}  // namespace kw::testing
