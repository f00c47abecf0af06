// The per-case stages of the preflight: launch_geometry, correctness and
// quick_bench, on one setup of the case.
#include <algorithm>
#include <cmath>

#include "case_run.hpp"
#include "kernel_trace.hpp"
#include "kw/common/stats.hpp"

namespace kwbench {

using namespace case_run;

namespace {

// The per-case stages on a case already set up: one setup serves every
// stage of the preflight.
CaseOutcome launch_geometry_of(Prepared& prepared) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  ExpectedLaunch expected = c.expected_launch();
  outcome.part["expected_launch"] = expected_launch_json(expected);
  std::vector<ObservedLaunch> launches;
  {
    KernelTrace trace;
    c.run_candidate(*prepared.state);
    launches = trace.collect();
  }
  json observed = json::array();
  std::vector<std::string> problems;
  bool matched = false;
  std::string seen;
  for (const ObservedLaunch& launch : launches) {
    observed.push_back({{"kernel", launch.kernel},
                        {"grid", dim3_json(launch.grid)},
                        {"block", dim3_json(launch.block)},
                        {"registers", launch.registers},
                        {"static_smem", launch.static_smem},
                        {"dynamic_smem", launch.dynamic_smem},
                        {"duration_ns", launch.duration_ns}});
    seen += (seen.empty() ? "" : ", ") + launch.kernel + " block" + dim3_text(launch.block) + " grid" +
            dim3_text(launch.grid);
    if (!glob_match(expected.kernel_pattern, launch.kernel)) continue;
    matched = true;
    if (!(launch.block == expected.block)) {
      problems.push_back("block: expected " + dim3_text(expected.block) + ", observed " +
                         dim3_text(launch.block) + " (" + launch.kernel + ")");
    }
    if (expected.grid && !(launch.grid == *expected.grid)) {
      problems.push_back("grid: expected " + dim3_text(*expected.grid) + ", observed " +
                         dim3_text(launch.grid));
    }
    if (expected.max_registers && launch.registers > *expected.max_registers) {
      problems.push_back("registers: at most " + std::to_string(*expected.max_registers) +
                         " expected, observed " + std::to_string(launch.registers));
    }
    if (expected.max_shared_bytes && launch.static_smem + launch.dynamic_smem > *expected.max_shared_bytes) {
      problems.push_back("shared memory: at most " + kib(*expected.max_shared_bytes) +
                         " expected, observed " + kib(launch.static_smem + launch.dynamic_smem));
    }
  }
  outcome.part["launches"] = observed;
  if (!matched) {
    outcome.status = "failed";
    outcome.message = "no launch of a kernel matching \"" + expected.kernel_pattern +
                      "\"; observed: " + (seen.empty() ? "no kernel launches" : seen);
  } else if (!problems.empty()) {
    outcome.status = "failed";
    for (const std::string& problem : problems)
      outcome.message += (outcome.message.empty() ? "" : "; ") + problem;
  } else {
    outcome.message = std::to_string(launches.size()) + " launch(es), geometry as declared";
  }
  return outcome;
}

CaseOutcome correctness_of(Prepared& prepared) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  c.poison_output(*prepared.state);
  c.run_candidate(*prepared.state);
  KW_CUDA_CHECK(cudaStreamSynchronize(prepared.stream));
  Accuracy accuracy = c.check(*prepared.state);
  double tolerance = c.tolerance();
  bool finite = std::isfinite(accuracy.rel_l2_err) && std::isfinite(accuracy.max_abs_err);
  bool passed = accuracy.nonfinite == 0 && finite && accuracy.rel_l2_err <= tolerance;
  outcome.details["reference"] = accuracy.reference_from_cache ? "cached" : "computed";
  outcome.part["correctness"] = {{"passed", passed},
                                 {"rel_l2_err", finite ? accuracy.rel_l2_err : 0.0},
                                 {"max_abs_err", finite ? accuracy.max_abs_err : 0.0},
                                 {"tolerance", tolerance},
                                 {"nonfinite", accuracy.nonfinite}};
  if (accuracy.nonfinite > 0) {
    outcome.status = "failed";
    outcome.message = std::to_string(accuracy.nonfinite) +
                      " output values are NaN/Inf (unwritten outputs keep the NaN poison)";
  } else if (!passed) {
    outcome.status = "failed";
    outcome.message = "relative L2 error " + format("%.3g", accuracy.rel_l2_err) + " exceeds the tolerance " +
                      format("%.3g", tolerance) + " (max abs error " + format("%.3g", accuracy.max_abs_err) +
                      ")";
  } else {
    outcome.message = "rel L2 " + format("%.3g", accuracy.rel_l2_err) + " <= " + format("%.3g", tolerance);
  }
  return outcome;
}

CaseOutcome quick_bench_of(Prepared& prepared, const BenchOptions& options) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  json skipped = json::object();
  std::vector<Impl> impls = runnable_impls(c, skipped);
  EventTimer timer;
  std::vector<std::vector<double>> samples(impls.size());
  for (const Impl& impl : impls) run_impl(c, impl, *prepared.state);  // warm-up
  KW_CUDA_CHECK(cudaStreamSynchronize(prepared.stream));
  for (int i = 0; i < options.quick_iterations; ++i) {
    for (std::size_t k = 0; k < impls.size(); ++k) {
      samples[k].push_back(timer.time_ns(prepared.stream, [&] { run_impl(c, impls[k], *prepared.state); }));
    }
  }
  json medians = json::object();
  for (std::size_t k = 0; k < impls.size(); ++k) medians[impls[k].name] = kw::common::median(samples[k]);
  outcome.details = {{"median_ns", medians}, {"skipped_baselines", skipped}};
  SanityRange range = c.sanity();
  double candidate = medians["candidate"];
  if (range.max_ns > 0 && candidate > range.max_ns) {
    outcome.status = "failed";
    outcome.message = "candidate median " + format("%.1f", candidate / 1000) +
                      " us exceeds the sanity bound " + format("%.1f", range.max_ns / 1000) + " us";
    return outcome;
  }
  if (!range.versus.empty()) {
    std::string versus = "baseline:" + range.versus;
    if (!medians.contains(versus)) {
      outcome.message = "sanity range vs " + versus + " not checked: " +
                        (skipped.contains(versus) ? skipped[versus].get<std::string>() : "no such baseline");
      return outcome;
    }
    double speedup = medians[versus].get<double>() / candidate;
    outcome.details["speedup"] = speedup;
    if (range.bounded && (speedup < range.min_speedup || speedup > range.max_speedup)) {
      outcome.status = "failed";
      outcome.message = "candidate runs at " + speedup_text(speedup) + " of " + versus + " (median " +
                        format("%.1f", candidate / 1000) + " us vs " +
                        format("%.1f", medians[versus].get<double>() / 1000) + " us); its sanity range is " +
                        range_text(range);
      return outcome;
    }
    outcome.message = speedup_text(speedup) + " of " + versus + ", " +
                      (range.bounded ? "inside " + range_text(range) : std::string("no bound set"));
    return outcome;
  }
  outcome.message = "median " + format("%.1f", candidate / 1000) + " us";
  return outcome;
}

}  // namespace

CaseOutcome run_launch_geometry(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return launch_geometry_of(prepared);
}

CaseOutcome run_correctness(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return correctness_of(prepared);
}

CaseOutcome run_quick_bench(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return quick_bench_of(prepared, options);
}

void run_preflight(Case& c, const BenchOptions& options, std::size_t stages,
                   const std::function<void(std::size_t)>& on_start,
                   const std::function<void(std::size_t, const CaseOutcome&)>& on_result) {
  stages = std::min(stages, kPreflightCaseStages.size());
  if (!c.timed()) stages = std::min<std::size_t>(stages, 2);  // no quick_bench
  if (stages == 0) return;
  on_start(0);
  std::unique_ptr<Prepared> prepared;
  try {
    prepared = std::make_unique<Prepared>(c, options);
  } catch (const std::exception& error) {
    on_result(0, failed_outcome(c, std::string("setup: ") + error.what()));
    return;
  }
  for (std::size_t stage = 0; stage < stages; ++stage) {
    if (stage > 0) on_start(stage);
    CaseOutcome outcome;
    try {
      outcome = stage == 0   ? launch_geometry_of(*prepared)
                : stage == 1 ? correctness_of(*prepared)
                             : quick_bench_of(*prepared, options);
    } catch (const std::exception& error) {
      outcome = failed_outcome(c, error.what());
    }
    on_result(stage, outcome);
    if (outcome.status == "failed") return;  // its later stages are skipped for every case
  }
}

}  // namespace kwbench
