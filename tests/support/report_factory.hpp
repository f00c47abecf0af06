// Builds valid run reports with realistic GPU timing noise (tests and
// benchmarks). Samples are log-normal around each case's base time.
#pragma once

#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "kw/common/stats.hpp"

namespace kw::testing {

struct ReportSpec {
  std::string project = "demo";
  std::string commit;  // 40 hex; make_commit() gives one
  std::string branch = "main";
  std::string base_commit;
  std::string gpu_model = "NVIDIA H100 80GB HBM3";
  int cases = 3;
  double case_ns = 20000;  // case i takes (i + 1) times this
  int samples = 30;
  double noise = 0.01;             // relative, log-normal sigma
  double slowdown = 1.0;           // candidate time multiplier
  double baseline_slowdown = 1.0;  // in-run baseline implementation's time multiplier (machine drift)
  int throttled = 0;               // candidate samples taken while throttled (x1.3, marked)
  std::uint64_t seed = 1;
  std::string failed_stage;  // a stage name to mark failed, or empty
  bool failed_correctness = false;
  std::int64_t job_id = 0;  // 0 = none
  std::string agent = "gpu-host-1";
  // Replicates (0: a report of an older agent, its samples one replicate):
  // `samples` per replicate, each replicate's level moved by
  // replicate_noise (log sd), as separate processes on a GPU are.
  int replicates = 0;
  double replicate_noise = 0.005;
  // base_commit's candidate measured in the same job (needs base_commit and
  // replicates), alternating with the head's.
  bool ab = false;
  double base_slowdown = 1.0;
  double run_shift = 1.0;  // the whole run's level (both sides of an A/B): between-run drift
  int baselines = 1;       // in-run baseline implementations: baseline:cudnn, baseline:cublas, ...
};

inline std::string make_commit(std::uint64_t n) {
  char buffer[41];
  std::snprintf(buffer, sizeof(buffer), "%016llx%024llx", static_cast<unsigned long long>(n * 2654435761ull),
                static_cast<unsigned long long>(n));
  return std::string(buffer, 40);
}

inline nlohmann::json make_report(const ReportSpec& spec) {
  using nlohmann::json;
  std::mt19937_64 rng(spec.seed);
  std::normal_distribution<double> gauss(0.0, spec.noise);
  auto samples = [&](double center) {
    std::vector<double> out;
    for (int i = 0; i < spec.samples; ++i) out.push_back(std::round(center * std::exp(gauss(rng)) * 10) / 10);
    return out;
  };
  std::normal_distribution<double> replicate_gauss(0.0, spec.replicate_noise);
  auto measurement = [&](const std::string& impl, double center, int throttled) {
    center *= spec.run_shift;
    std::vector<double> s;
    std::vector<int> replicate_of;
    for (int r = 0; r < std::max(1, spec.replicates); ++r) {
      double level = spec.replicates > 0 ? center * std::exp(replicate_gauss(rng)) : center;
      for (double v : samples(level)) {
        s.push_back(v);
        replicate_of.push_back(r);
      }
    }
    std::vector<int> marked;
    for (int i = 0; i < throttled && i < static_cast<int>(s.size()); ++i) {
      s[static_cast<std::size_t>(i)] *= 1.3;
      marked.push_back(i);
    }
    json m{{"impl", impl}, {"samples_ns", s}, {"median_ns", kw::common::median(s)}, {"flops", 1e9}};
    if (!marked.empty()) m["throttled_samples"] = marked;
    if (spec.replicates > 0) m["replicates"] = replicate_of;
    return m;
  };
  json stages = json::array();
  for (const char* name : {"build", "load", "launch_geometry", "correctness", "quick_bench", "full_bench"}) {
    bool failed = spec.failed_stage == name;
    stages.push_back({{"name", name},
                      {"status", failed ? "failed" : "passed"},
                      {"duration_ms", 100},
                      {"message", failed ? std::string(name) + " failed in the test double" : ""},
                      {"log_tail", ""}});
  }
  json cases = json::array();
  for (int i = 0; i < spec.cases; ++i) {
    double base = spec.case_ns * (i + 1);
    json c{{"name", "attention.fwd/case" + std::to_string(i)},
           {"params", {{"S", 1024 * (i + 1)}, {"dtype", "fp16"}}},
           {"launches", json::array({{{"kernel", "flash_fwd_kernel"},
                                      {"grid", {8, 16, 1}},
                                      {"block", {128, 1, 1}},
                                      {"registers", 168},
                                      {"static_smem", 0},
                                      {"dynamic_smem", 49152}}})},
           {"correctness",
            {{"passed", !spec.failed_correctness},
             {"rel_l2_err", spec.failed_correctness ? 0.5 : 3e-4},
             {"max_abs_err", 1e-3},
             {"tolerance", 1e-2},
             {"nonfinite", 0}}},
           {"measurements", json::array({measurement("candidate", base * spec.slowdown, spec.throttled)})}};
    static const std::array<const char*, 4> kBaselines = {"baseline:cudnn", "baseline:cublas",
                                                          "baseline:cutlass", "baseline:triton"};
    for (int b = 0; b < spec.baselines; ++b) {
      c["measurements"].push_back(measurement(kBaselines.at(static_cast<std::size_t>(b)),
                                              base * (0.9 - 0.05 * b) * spec.baseline_slowdown, 0));
    }
    if (spec.ab) {
      json base_candidate = measurement("candidate", base * spec.base_slowdown, 0);
      base_candidate.erase("flops");
      c["base_measurements"] = json::array({base_candidate});
    }
    cases.push_back(std::move(c));
  }
  json report{{"schema", "kernelwatch.run/1"},
              {"project", spec.project},
              {"commit", spec.commit.empty() ? make_commit(spec.seed) : spec.commit},
              {"branch", spec.branch},
              {"agent", {{"name", spec.agent}, {"version", "0.1.0"}}},
              {"device",
               {{"name", spec.gpu_model},
                {"compute_capability", "9.0"},
                {"memory_bytes", 85520809984LL},
                {"sm_count", 132},
                {"l2_bytes", 52428800}}},
              {"started_at", "2026-11-21T10:00:00Z"},
              {"finished_at", "2026-11-21T10:01:00Z"},
              {"gpu_seconds", 42.5},
              {"stages", stages},
              {"cases", cases}};
  if (!spec.base_commit.empty()) report["base_commit"] = spec.base_commit;
  if (spec.job_id > 0) report["job_id"] = spec.job_id;
  return report;
}

}  // namespace kw::testing
