// How a run is judged, as pure functions over plain values: the noise each
// case is judged with (learned from the stored histories of the run's GPU
// model), one implementation's comparison (A/B against the base measured in
// the job, else against its history; the brake rule), the energy comparison,
// and the run's decision with its machine-drift signal. kw-server reads what
// they take from PostgreSQL and stores what they return; the rules
// themselves live here, beside the tests of detection.hpp they build on.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kw/common/detection.hpp"
#include "kw/common/run_report.hpp"

namespace kw::common {

// A history as a case is judged against it: run locations and their clocks.
struct RunHistory {
  std::vector<double> locations;
  std::vector<RunClock> clocks;  // mhz 0 where a run reported none
};

// One case's recent stored runs on its GPU model's default branch, oldest
// first: run ids, candidate locations, replicate spreads and clocks.
struct CaseHistory {
  std::vector<std::int64_t> run_ids;
  std::vector<double> locations;
  std::vector<std::int64_t> replicate_counts;  // 0 where the run had none recorded
  std::vector<double> replicate_sds;
  std::vector<RunClock> clocks;

  // The runs up to and including `run_id` (the baseline): what the
  // candidate's level is forecast from.
  RunHistory through(std::int64_t run_id) const;
  // At the newest run's clock, where the history has clocks: the forecast
  // errors the between-run noise is learned from are then those at equal
  // clock, as the head is judged.
  std::vector<double> at_clock(const DetectionSettings& settings) const;
};

// The noise of one GPU model, learned from the histories of every case in a
// run: replicate spread pooled over runs and cases, and the median forecast
// error of the cases with a long enough history (df 0: nothing learned, the
// defaults stand).
struct GpuNoise {
  PooledSd replicate;
  PooledSd run;
};
GpuNoise learn_gpu_noise(const std::map<std::string, CaseHistory>& histories,
                         const DetectionSettings& settings);

// A case's noise model: its own replicate spread shrunk towards the GPU
// model's, and the GPU model's between-run spread (the case's own history
// enters through its forecast).
NoiseModel case_noise(const CaseHistory& history, const GpuNoise& gpu, const DetectionSettings& settings);

// One comparison of a run before its decision, and its status after.
struct Comparison {
  std::string case_name;
  std::string kind = "time";  // or "energy": the candidate's joules per iteration
  std::string impl;           // "candidate" or "baseline:<name>"
  CaseTest test;
  ChangeStatus status = ChangeStatus::no_baseline;
  double ratio_of_medians = 1;
  double min_threshold = 0;
  std::size_t excluded_throttled = 0;  // samples taken while throttled, left out
  bool throttled_out = false;          // not judged: most samples taken while the GPU braked
  bool in_job = false;                 // against the base measured in the same job
  std::optional<CaseTest> first_pass;  // the first pass's test of a case measured again
  // The smallest slowdown this test flags nine times in ten (candidates;
  // detectable_change), set by decide_run.
  std::optional<double> detectable;

  bool measured() const { return test.method != CaseTest::Method::none; }
  bool candidate() const { return impl == "candidate"; }
};

// What one implementation of a case is compared with: the base measured in
// the same job, else the baseline run's measurement and the case's history
// up to that run. `baseline_run`: the run has a baseline run at all (it may
// lack this implementation).
struct ComparedWith {
  const Measurement* in_job_base = nullptr;
  const Measurement* stored_base = nullptr;
  bool baseline_run = false;
  RunHistory history;
};

// The brake rule: a side with more than this share of its samples taken
// while the GPU braked (NVML's hardware slowdown, software and hardware
// thermal slowdown, power brake) measured the GPU, not the code, and is not
// judged. The software power cap is how a healthy GPU runs a heavy kernel,
// and the comparison at equal clock takes it.
inline constexpr double kMostlyThrottled = 0.5;
inline constexpr std::uint64_t kBrakeReasons = 0x8 | 0x20 | 0x40 | 0x80;

// One implementation's time: A/B when the base was measured in the job,
// else against the history (with the baseline run's location where the
// history is empty). `head_case` may be null (commits compared after the
// fact: no GPU state, no first pass).
Comparison judge_time(const std::string& case_name, const Case* head_case, const Measurement& head,
                      ComparedWith with, const NoiseModel& noise, double min_threshold,
                      const DetectionSettings& settings);

// Energy's noise: a conservative prior until one is learned. On an H100 the
// joules per iteration of a >= 100 us kernel move 1.7% between replicates
// and 1.1% between runs (median; docs/results/energy-aa-h100.txt).
NoiseModel energy_noise(const DetectionSettings& settings);

// Energy is judged only for kernels of at least this long: back to back, a
// ~7 us kernel leaves the GPU waiting on launches, and the board's idle
// power is most of its joules. On the H100 (docs/results/energy-aa-h100.txt:
// one build's second run judged against its first) such cases' joules per
// iteration moved 7.6% between runs (median of 24, up to 23%) and 10 of 24
// came out p < 0.05 in that A/A; the 48 cases of >= 100 us moved 1.1% (max
// 5.3%) and none did.
inline constexpr double kMinEnergyKernelNs = 100e3;

// The candidate's joules per iteration as a second metric: A/B against the
// base measured in the job, else against the baseline run's stored energy
// with the between-run prior. nullopt where either side measured no energy
// or the kernel is shorter than kMinEnergyKernelNs.
std::optional<Comparison> judge_energy(const std::string& case_name, const Measurement& head,
                                       const Measurement* in_job_base, const Measurement* stored_base,
                                       double min_threshold, const DetectionSettings& settings);

// The median change of the baseline implementations across a run's cases:
// flagged where it is past half the threshold and three of four moved its
// way (the machine, not the code, changed).
struct MachineDrift {
  double median_change = 0;
  std::size_t comparisons = 0;
  std::size_t same_direction = 0;
  bool flagged = false;
};

// A run's decision: the candidates by Holm at run_alpha (the verdict), the
// baseline implementations by a decision of their own (context), each
// comparison's status set, and a note on one held back by the run's others.
struct RunDecision {
  bool regression = false;
  bool improvement = false;
  std::size_t candidate_comparisons = 0;  // judged, not counting those without a baseline
  std::optional<MachineDrift> machine_drift;
};
RunDecision decide_run(const std::vector<Comparison*>& comparisons, const DetectionSettings& settings);

// What a run keeps of one case, computed by the rule before the run is
// stored (the store writes it as it is): each implementation's median and
// the 95% interval of its median, for the dashboard; and the candidate's
// location over its replicates, their count and spread, and the clock fit,
// which later runs' histories are made of, with its energy per iteration
// (the geometric mean of its replicates') and median board power.
struct CandidateSummary {
  double location = 0;
  std::int64_t replicates = 0;
  std::optional<double> replicate_sd;
  RunClock clock;  // mhz 0: no clock measured
  std::optional<double> energy_j, power_w;
};

struct CaseSummary {
  std::vector<std::pair<std::string, double>> medians;                   // implementation -> ns
  std::vector<std::pair<std::string, std::pair<double, double>>> bands;  // implementation -> 95% interval
  std::optional<CandidateSummary> candidate;                             // none without a candidate measured
};

CaseSummary summarize_case(const Case& c, const DetectionSettings& settings);

// A run's detection "inconclusive_gate" (its cases inconclusive far past
// their thresholds, and what the project's inconclusive_gate made of them) as
// one line, the same for the commit status, `kw gate` and the comment: ""
// when the run has none.
std::string inconclusive_gate_text(const nlohmann::json& detection);

}  // namespace kw::common
