// Regression detection for one case: is the head run's timing distribution
// slower or faster than the baseline run's by more than the case's threshold,
// with statistical confidence? One implementation, used by kw-server and by
// kw-detector-bench, so the benchmark measures exactly what ships.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kw::common {

enum class ChangeStatus { regression, improvement, unchanged, no_baseline };
std::string_view to_string(ChangeStatus status);

struct DetectionSettings {
  // Smallest relative change ever flagged (per project, per-case override).
  double min_threshold = 0.01;
  // The threshold also grows to this many times the case's run-to-run noise,
  // estimated from its history, so noisy cases need larger changes.
  double history_k = 4.0;
  double confidence = 0.99;     // of the ratio interval
  double alpha = 0.01;          // Mann-Whitney significance
  std::size_t min_history = 5;  // runs needed before history widens the threshold
  std::size_t min_samples = 5;  // per side, after dropping throttled samples
  // With a history: how many of its one-step forecast errors (robust spread)
  // the head must sit above the forecast level, and the two-run Mann-Whitney
  // p-value it must also reach in the same direction.
  double history_z = 3.5;
  double history_alpha = 0.1;
};

// One implementation's samples in one run.
struct Timing {
  std::span<const double> samples_ns;
  std::span<const std::int64_t> throttled;  // indices of samples taken while throttled
};

struct Comparison {
  ChangeStatus status = ChangeStatus::no_baseline;
  double ratio = 1;             // Hodges-Lehmann estimate of head / base (times: > 1 is slower)
  double ratio_of_medians = 1;  // median(head) / median(base)
  double lower = 1, upper = 1;  // interval for `ratio`
  double confidence = 0;
  double p_value = 1;
  double threshold = 0;                   // relative change needed to flag
  double head_noise = 0, base_noise = 0;  // relative noise (1.4826 MAD / median) of each side
  std::size_t head_samples = 0, base_samples = 0;
  std::size_t excluded_throttled = 0;
  std::string note;
};

// A run's location, the value a case's history is made of: the 25%-trimmed
// mean of the samples not taken while throttled (of all of them when fewer
// than min_samples remain), so a throttled stretch moves neither the history
// nor the run judged against it.
double location(const Timing& timing, const DetectionSettings& settings);

// The threshold for a case: max(min_threshold, history_k x run-to-run noise),
// where run-to-run noise is the interquartile spread of successive differences
// of log(median) over the case's recent history (oldest first). Successive
// differences ignore slow drift, which is not noise.
double noise_aware_threshold(std::span<const double> history_medians_ns, double min_threshold,
                             const DetectionSettings& settings);

// The level a case's next run is expected at, from its history of per-run
// locations (oldest first): exponential smoothing of log(location), the
// smoothing weight chosen to minimise the history's own one-step forecast
// errors (a stable case averages many runs, a drifting one follows the latest),
// and the size of those errors as the scale. With fewer than 8 runs
// (or min_history): none.
struct Forecast {
  double level_ns = 0;
  double scale = 0;  // of log(location): RMS one-step error, each capped at 2.5 robust sigmas
  double smoothing = 0;
  std::size_t runs = 0;
};
std::optional<Forecast> forecast_level(std::span<const double> history_locations_ns,
                                       const DetectionSettings& settings);

// Times (lower is better): regression when head is slower.
Comparison compare_times(const Timing& head, const Timing& base, double threshold,
                         const DetectionSettings& settings);

// compare_times for a case with a history ending at the baseline run: the
// ratio, interval and p-value are still head vs baseline run (the record), but
// the status is decided against the forecast level, which pools the history
// instead of trusting one baseline run: regression when the head's location
// (as stored for the history) is more than history_z scales
// and more than min_threshold above the forecast, and the two-run test agrees
// (p < history_alpha, same direction). `threshold` then reports the change that
// would have been needed. Without enough history: compare_times with the
// noise-aware threshold.
Comparison compare_times_with_history(const Timing& head, const Timing& base,
                                      std::span<const double> history_locations_ns, double min_threshold,
                                      const DetectionSettings& settings);

// In-run speedup of the candidate over one baseline implementation
// (baseline time / candidate time, higher is better), per interleaved sample
// pair, compared between runs: regression when the speedup dropped. Machine
// drift that slows both implementations alike cancels out.
Comparison compare_speedups(const Timing& head_candidate, const Timing& head_baseline,
                            const Timing& base_candidate, const Timing& base_baseline, double threshold,
                            const DetectionSettings& settings);

}  // namespace kw::common
