// Regression detection: the case rule and the run verdict, as pure functions.
// kw-server calls them on stored history, the agent on its own first pass (to
// choose which cases to measure again) and kw-detector-bench on an empirical
// noise model, so all three judge exactly alike. docs/detection.md explains
// the model to users.
//
// The unit of evidence is the replicate: one fresh measurement of a case
// (its own process, allocations and warm-up). Samples inside one replicate are
// not independent draws of "this commit on this GPU model": between
// replicates and between runs the level moves by 5-25x the within-replicate
// error, so every test here works on replicate locations, with the
// between-replicate and between-run variance in it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kw::common {

// inconclusive: not flagged, though the data hold a change that matters: the
// estimate itself moved past the threshold, or (A/B) the interval reaches
// past `resolution` thresholds. docs/detection.md says why not the
// interval's end at the threshold itself.
enum class ChangeStatus { regression, improvement, unchanged, inconclusive, no_baseline };
std::string_view to_string(ChangeStatus status);

// The detection rule's version: what every stored run's locations and
// comparisons were computed with (runs.rule_version). A new default below,
// or a change to how detection.cpp and judge.cpp compute a location or a
// comparison, is a new rule, never a silent one:
// - bump kRuleVersion (RuleVersionTest fails on defaults it does not know);
// - give schema/ a migration that moves to the new version the stored runs
//   the change leaves valid, or re-judge them (tools/rejudge-series.sh);
// - say what changed under "Rule versions" in docs/detection.md.
// A case's history holds only runs of the current version, so one series
// is never judged by two rules. The defaults are defined here alone: the
// schema's column defaults are checked against them (MigrationsTest) and a
// test greps the sources for copies (tests/rule_defaults.py).
inline constexpr int kRuleVersion = 3;

struct DetectionSettings {
  // Smallest relative change ever flagged (per project, per-case override).
  double min_threshold = 0.01;
  // The smallest relative change in a case's energy flagged (per project).
  double energy_threshold = 0.05;
  // Family-wise false-alarm rate of one run: the chance that a run of an
  // unchanged build flags any case (Holm over the run's comparisons). A
  // project may set it up to kMaxRunAlpha.
  double run_alpha = 0.01;
  static constexpr double kMaxRunAlpha = 0.2;
  // The agent's first pass measures a case again when its unadjusted
  // p-value is under this (and the change is past half the threshold).
  double screen_alpha = 0.05;
  // With a history: how many runs the forecast needs (fewer give too few
  // forecast errors to choose its smoothing weight by).
  std::size_t min_history = 8;
  // A case's history: its newest runs on the default branch and GPU model
  // under the current rule, at most this many.
  std::size_t history_runs = 30;
  std::size_t min_samples = 5;  // per replicate, after dropping throttled samples
  // Degrees of freedom given to the noise prior when it is combined with
  // what the run itself shows.
  double prior_df = 8;
  // An A/B job whose own between-replicate spread is this improbable under
  // the prior (an F test) is judged by its own spread alone.
  double prior_conflict_alpha = 0.01;
  // A replicate this many between-replicate sds (and at least 3%) from its
  // side's median, with few others near it (none in an A/B job), is an
  // outlier and left out (fewer than half of a side).
  double outlier_sds = 6;
  // ... and never nearer its side's median than this (relative), however
  // quiet the case.
  double outlier_floor = 0.03;
  // Below this within-side spread of log SM clock the clock did not move
  // enough to estimate a slope by, and the tests compare plain times.
  double min_clock_sd = 0.0025;
  // The noise of a case's energy (log sd), between replicates and runs alike.
  double energy_sd = 0.03;
  // An A/B comparison is unchanged only if its interval rules out a change
  // of this many thresholds; wider, it is inconclusive and the agent buys
  // replicates. So a change of c thresholds is called unchanged only by an
  // estimate (c - 1) q / (resolution - 1) standard errors short of it (q the
  // interval's quantile, about 2.8), whatever the noise: 4.2 for a change of
  // four thresholds.
  double resolution = 3;
};

// Noise of one case on one GPU model, on the log scale (0.01 = 1%), with the
// degrees of freedom behind each estimate.
struct NoiseModel {
  // Between replicates of one job (fresh process, allocations, warm-up).
  // The default is conservative: 1.5% against the 1.0-1.1% median measured
  // on an H100 (docs/results/noise-model-h100.json).
  double replicate_sd = 0.015;
  double replicate_df = 0;
  // Between runs (jobs) of the same build: what a run's location (the mean of
  // its replicates) scatters by from run to run.
  double run_sd = 0.015;
  double run_df = 0;
  // Between replicates of one job once they are compared at equal SM clock
  // (test_ab with clocks): in the H100 pull requests, 0.3-1.5% (median 0.9%)
  // for the large cases against 1.6% before (docs/results/noise-model-h100.json).
  // A conservative default; not learned yet.
  double clock_adjusted_sd = 0.01;
  // Between the two sides of one A/B job: an offset of each side's level in
  // nanoseconds, whatever the kernel's length, that alternating replicates
  // do not cancel (each side's processes are its own). Measured on
  // one H100 host (two A/A jobs of its series): all ~7 us
  // cases of a job moved together by 0.5-3% between the sides, in a
  // different direction per job, the >= 0.9 ms cases not at all; 35 ns per
  // side (0.49% of 7 us) is that job's between-side spread. On the other 27
  // A/A jobs of the H100 series it was not seen. Relative to a 1 ms kernel it
  // is nothing; relative to a 7 us one it bounds what one job can tell.
  double side_offset_ns = 35;
};

// The conservative default before anything is stored for a GPU model.
NoiseModel default_noise();

// How a replicate's samples make its location.
//  - trimmed_mean: the 25%-trimmed mean. GPU kernels timed by events scatter
//    both ways around their level, and a trimmed mean uses most samples.
//  - minimum: the fastest sample. A CPU benchmark's time on a shared host
//    only grows with what else runs (time slices, caches and memory bandwidth
//    taken by the neighbours), so the least-disturbed repetition is its
//    level. On a 2-core host with two compilers busy on both cores, four
//    Google Benchmark benchmarks' replicates scattered by 0.8-3.3% (trimmed
//    mean) against 0.4-1.2% (minimum), and an A/B of four replicates a side
//    found a 5% slowdown of a 1.2 us one in 57 of 63 jobs by the minimum,
//    none by the trimmed mean (common/tests/gbench_busy_host_test.cpp).
enum class ReplicateLocation { trimmed_mean, minimum };
std::string_view to_string(ReplicateLocation rule);
std::optional<ReplicateLocation> replicate_location_from(std::string_view name);

// The noise a measurement is judged with: one judged by its minimum is a CPU
// time, which has no GPU launch latency, and so no between-side offset. On
// the busy-host repetitions of tests/data/gbench-busy-host the offset made a
// 1.2 us benchmark's A/B interval +-13%; without it a 10% slowdown of that
// benchmark is found in 63 of 63 jobs, and no no-op job is flagged.
NoiseModel noise_for(NoiseModel noise, ReplicateLocation rule);

// One implementation's samples in one run. `replicates[i]` is the replicate
// sample i came from; empty means one replicate (reports of older agents).
struct Timing {
  std::span<const double> samples_ns;
  std::span<const std::int64_t> throttled;  // indices of samples taken while throttled
  std::span<const std::int64_t> replicates;
  std::span<const double> sm_mhz;  // the SM clock of each sample; may be empty
  ReplicateLocation rule = ReplicateLocation::trimmed_mean;
};

// The location of each replicate, oldest first, by the timing's rule over its
// samples not taken while throttled (over all of them when fewer than
// min_samples remain), so a throttled stretch moves no location. Replicates
// at or past `before` are left out (the first pass of a re-measured case).
std::vector<double> replicate_locations(const Timing& timing, const DetectionSettings& settings,
                                        std::optional<std::int64_t> before = std::nullopt);

// The mean SM clock of each replicate, in the order of replicate_locations;
// empty when the timing has no clocks.
std::vector<double> replicate_clocks(const Timing& timing, std::optional<std::int64_t> before = std::nullopt);

// A run's location: the geometric mean of its replicate locations, the value
// a case's history is made of. With four or more replicates, outliers (more
// than 9% from their median, fewer than half) are left out, as they are
// of the head that is judged against it.
double location(std::span<const double> replicate_locations);
double location(const Timing& timing, const DetectionSettings& settings);

// Sample standard deviation of log(replicate location) over the replicates a
// run's location keeps (a stalled replicate would make it the stall's size);
// nullopt below two.
std::optional<double> replicate_log_sd(std::span<const double> locations);

// The level a case's next run is expected at, from its history of per-run
// locations (oldest first): exponential smoothing of log(location), the
// smoothing weight chosen on the history's own one-step forecast errors (a
// stable case averages many runs, a drifting one follows the latest), and the
// size of those errors as the scale. Below min_history runs: none.
struct Forecast {
  double level_ns = 0;
  double scale = 0;  // of log(location): RMS one-step error
  // The same with each error capped at 2.5 robust sigmas: the typical
  // spread, without the history's far runs (what a GPU model's between-run
  // prior is learned from: one regression run must not widen every case's).
  double typical_scale = 0;
  double smoothing = 0;
  std::size_t runs = 0;
  std::size_t errors = 0;  // one-step errors behind the scale
};
std::optional<Forecast> forecast_level(std::span<const double> history_locations_ns,
                                       const DetectionSettings& settings);

// A run's SM clock, for judging it against its history at equal clock: the
// geometric mean of its replicates' clocks, and within the run the sums of
// the replicates' log-clock deviations squared (sxx) and times their
// log-location deviations (sxy), from which the history pools one slope.
// Outliers are left out as location() leaves them out. mhz 0: the run
// reported no clocks.
struct RunClock {
  double mhz = 0;
  double sxx = 0, sxy = 0;
  std::int64_t replicates = 0;
};
RunClock run_clock(std::span<const double> replicate_locations, std::span<const double> replicate_clocks);

// A history's run locations moved to one SM clock (the head's), with the
// slope of log time on log clock pooled inside its runs and the head, as
// test_ab does inside one job: under a power cap a run's level follows the
// clock it settled at, which is no change of the code. Runs without clocks
// are left out when at least min_history runs have them; otherwise, or when
// the clock did not move inside the runs, the locations are returned as
// they are (adjusted false).
struct ClockedHistory {
  std::vector<double> locations_ns;
  bool adjusted = false;
  double slope = 0;
  double sxx = 0;            // pooled within-run; the slope's variance is sd^2 / sxx
  double mean_log_mhz = 0;   // of the history runs kept
  std::size_t left_out = 0;  // runs without clocks
};
ClockedHistory history_at_clock(std::span<const double> history_locations_ns,
                                std::span<const RunClock> history_clocks, const RunClock& head,
                                const DetectionSettings& settings);

// One case's test, before the run's multiplicity correction. Effects are
// log(head / base): > 0 is slower.
struct CaseTest {
  enum class Method {
    none,         // no baseline: nothing to compare with
    ab,           // base and head measured alternately in the same job
    history,      // head against the level forecast from the case's history
    baseline_run  // head against one stored baseline run, with the between-run prior
  };
  Method method = Method::none;
  double effect = 0;
  double se = 0;
  double df = 0;
  double p_value = 1;
  double ratio = 1, lower = 1, upper = 1;  // exp(effect) and its interval at 1 - run_alpha
  std::size_t head_replicates = 0, base_replicates = 0;
  double head_replicate_sd = 0, base_replicate_sd = 0;
  // With clocks: compared at equal SM clock, log time on log clock with
  // this common slope; clock_shift is log(head clock / base clock) (A/B: a
  // change's own effect on the clock, its power draw; history: against the
  // mean clock of the runs it was judged against).
  bool clock_adjusted = false;
  double clock_slope = 0, clock_shift = 0;
  std::string note;
};
std::string_view to_string(CaseTest::Method method);

// Base and head measured alternately in one job: Welch-free pooled t-test on
// the replicate locations, the pooled variance shrunk towards the prior's
// between-replicate variance, and each side's level carrying the noise
// model's side offset (side_offset_ns over the base's level) besides.
//
// With each replicate's SM clock (both sides, one per location) and a clock
// that moved between replicates, the test is an analysis of covariance: log
// time against log clock with one slope for both sides (between -1.25, time
// following the clock, and 0), so the comparison is at equal clock, as on a
// GPU with locked clocks. Under a power cap the clock a replicate gets moves
// by several percent with the GPU's temperature: that is most of the
// between-replicate spread of the large cases, and none of the change's
// doing. What a change does to the clock itself is clock_shift.
CaseTest test_ab(std::span<const double> head_locations, std::span<const double> base_locations,
                 const NoiseModel& noise, const DetectionSettings& settings,
                 std::span<const double> head_clocks = {}, std::span<const double> base_clocks = {});

// Head against its history (per-run locations, oldest first, up to the
// baseline run): with min_history runs, against the forecast with its scale
// shrunk towards the prior's between-run sd; with fewer, against the mean of
// the newest runs with the prior alone. The prior is the larger of the GPU
// model's between-run sd and, for a head of two or more replicates with a
// learned replicate_sd, replicate_sd / sqrt(head replicates). With the head's replicate clocks and
// each history run's clock, the history is first moved to the head's clock
// (history_at_clock).
CaseTest test_history(std::span<const double> head_locations, std::span<const double> history_locations_ns,
                      const NoiseModel& noise, const DetectionSettings& settings,
                      std::span<const double> head_clocks = {},
                      std::span<const RunClock> history_clocks = {});

// The run's decision over its candidate comparisons: Holm's step-down at
// run_alpha, and a flagged case must also move past its threshold. One that
// moved past its threshold without enough evidence is inconclusive.
struct Decision {
  std::vector<ChangeStatus> statuses;  // one per test, in order
  // Per test: `inconclusive` though its own interval excludes no change;
  // held back by the run's other comparisons (Holm). The run page says so
  // beside the interval.
  std::vector<bool> held_back;
  bool regression = false;
  bool improvement = false;
};
Decision decide(std::span<const CaseTest> tests, std::span<const double> min_thresholds,
                const DetectionSettings& settings);

// Whether a comparison that is not flagged still holds a change that matters
// (inconclusive): its estimate past the threshold, or an A/B interval past
// `resolution` thresholds. A history's interval is its runs' scatter, which
// more replicates of the head do not narrow, so only its estimate counts.
bool open_question(const CaseTest& test, double min_threshold, const DetectionSettings& settings);

// The smallest slowdown (relative: 0.008 is 0.8%) that this comparison's
// test flags with probability `power`: its estimate must pass Holm's first
// step at run_alpha over the run's `comparisons` (what a change alone in its
// run must pass) and the threshold, so the change must reach
// max(t_crit se, log(1 + threshold)) + t_power se. It says what the gate can
// see of a case with the noise and replicates this run had; nullopt for a
// comparison without a test.
std::optional<double> detectable_change(const CaseTest& test, double min_threshold, std::size_t comparisons,
                                        const DetectionSettings& settings, double power = 0.9);

// Cases the agent measures again: unadjusted p under screen_alpha and a
// change past half the threshold, in either direction.
bool needs_confirmation(const CaseTest& test, double min_threshold, const DetectionSettings& settings);

// Pools per-run replicate sds (each with its replicate count) into one
// between-replicate estimate and its degrees of freedom.
struct PooledSd {
  double sd = 0;
  double df = 0;
};
PooledSd pool_replicate_sds(std::span<const double> sds, std::span<const std::int64_t> counts);

// Shrinks an estimate with `df` degrees of freedom towards a prior with
// `prior_df` (a weighted mean of variances).
PooledSd shrink(PooledSd estimate, double prior_sd, double prior_df);

// Student's t: two-sided p-value, and the quantile for a two-sided interval.
double student_t_two_sided_p(double t, double df);
double student_t_quantile(double p, double df);

}  // namespace kw::common
