#include "kw/common/detection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "kw/common/stats.hpp"

namespace kw::common {

namespace {

struct Kept {
  std::vector<double> values;
  std::size_t excluded = 0;
};

// Drops throttled samples, unless that leaves too few to compare (then all
// are kept and the comparison says so).
Kept unthrottled(const Timing& timing, std::size_t min_samples) {
  Kept kept;
  std::set<std::int64_t> throttled(timing.throttled.begin(), timing.throttled.end());
  for (std::size_t i = 0; i < timing.samples_ns.size(); ++i) {
    if (throttled.contains(static_cast<std::int64_t>(i))) {
      ++kept.excluded;
    } else {
      kept.values.push_back(timing.samples_ns[i]);
    }
  }
  if (kept.values.size() < min_samples) {
    kept.values.assign(timing.samples_ns.begin(), timing.samples_ns.end());
    kept.excluded = 0;
  }
  return kept;
}

// One side of a comparison, sorted once: its median, noise and log-times
// come from the same sorted copy.
struct Side {
  std::vector<double> sorted;
  std::vector<double> sorted_logs;
  double median = 0;
  double noise = 0;

  explicit Side(std::vector<double> values) : sorted(std::move(values)) {
    std::sort(sorted.begin(), sorted.end());
    median = median_sorted(sorted);
    std::vector<double> deviations;
    deviations.reserve(sorted.size());
    for (double v : sorted) deviations.push_back(std::abs(v - median));
    std::sort(deviations.begin(), deviations.end());
    noise = median == 0 ? 0 : 1.4826 * median_sorted(deviations) / std::abs(median);
    sorted_logs.reserve(sorted.size());
    for (double v : sorted) sorted_logs.push_back(std::log(v));  // log keeps the order
  }
};

// `higher_is_worse`: for times a ratio above 1 is a regression; for speedups
// a ratio below 1 is.
Comparison compare(std::vector<double> head_values, std::vector<double> base_values, double threshold,
                   bool higher_is_worse, const DetectionSettings& settings) {
  Comparison result;
  result.threshold = threshold;
  result.head_samples = head_values.size();
  result.base_samples = base_values.size();
  if (head_values.empty() || base_values.empty()) {
    result.note = "no samples to compare";
    return result;
  }
  for (double v : head_values) {
    if (!(v > 0)) throw std::invalid_argument("compare: samples must be > 0");
  }
  for (double v : base_values) {
    if (!(v > 0)) throw std::invalid_argument("compare: samples must be > 0");
  }
  Side head(std::move(head_values)), base(std::move(base_values));
  ShiftEstimate shift = hodges_lehmann_shift_sorted(head.sorted_logs, base.sorted_logs, settings.confidence);
  MannWhitney test = mann_whitney_sorted(head.sorted, base.sorted);
  double ratio = std::exp(shift.estimate), lower = std::exp(shift.lower), upper = std::exp(shift.upper);
  result.ratio = ratio;
  result.ratio_of_medians = head.median / base.median;
  result.lower = lower;
  result.upper = upper;
  result.confidence = shift.confidence;
  result.p_value = test.p_value;
  result.head_noise = head.noise;
  result.base_noise = base.noise;

  bool significant = test.p_value < settings.alpha;
  bool slower = lower > 1 && ratio > 1 + threshold;
  bool faster = upper < 1 && ratio < 1 / (1 + threshold);
  bool worse = higher_is_worse ? slower : faster;
  bool better = higher_is_worse ? faster : slower;
  if (significant && worse) {
    result.status = ChangeStatus::regression;
  } else if (significant && better) {
    result.status = ChangeStatus::improvement;
  } else {
    result.status = ChangeStatus::unchanged;
  }
  return result;
}

std::string throttle_note(std::size_t excluded) {
  return excluded == 0 ? std::string()
                       : std::to_string(excluded) + " sample(s) taken while throttled were excluded";
}

}  // namespace

std::string_view to_string(ChangeStatus status) {
  switch (status) {
    case ChangeStatus::regression:
      return "regression";
    case ChangeStatus::improvement:
      return "improvement";
    case ChangeStatus::unchanged:
      return "unchanged";
    case ChangeStatus::no_baseline:
      return "no-baseline";
  }
  return "unchanged";
}

double location(const Timing& timing, const DetectionSettings& settings) {
  return trimmed_mean(unthrottled(timing, settings.min_samples).values);
}

double noise_aware_threshold(std::span<const double> history_medians_ns, double min_threshold,
                             const DetectionSettings& settings) {
  if (history_medians_ns.size() < settings.min_history) return min_threshold;
  std::vector<double> steps;
  for (std::size_t i = 1; i < history_medians_ns.size(); ++i) {
    if (history_medians_ns[i] > 0 && history_medians_ns[i - 1] > 0) {
      steps.push_back(std::log(history_medians_ns[i] / history_medians_ns[i - 1]));
    }
  }
  if (steps.size() + 1 < settings.min_history) return min_threshold;
  // Interquartile range / 1.349 estimates a normal sigma while ignoring a
  // quarter of outlying steps at each end; a difference of two runs has
  // sqrt(2) times one run's spread.
  double step_sigma = (quantile(steps, 0.75) - quantile(steps, 0.25)) / 1.34898;
  double run_sigma = step_sigma / std::sqrt(2.0);
  return std::max(min_threshold, std::expm1(settings.history_k * run_sigma));
}

Comparison compare_times(const Timing& head, const Timing& base, double threshold,
                         const DetectionSettings& settings) {
  Kept h = unthrottled(head, settings.min_samples);
  Kept b = unthrottled(base, settings.min_samples);
  Comparison result = compare(std::move(h.values), std::move(b.values), threshold, true, settings);
  result.excluded_throttled = h.excluded + b.excluded;
  result.note = throttle_note(result.excluded_throttled);
  return result;
}

std::optional<Forecast> forecast_level(std::span<const double> history_locations_ns,
                                       const DetectionSettings& settings) {
  std::vector<double> logs;
  for (double location : history_locations_ns) {
    if (location > 0) logs.push_back(std::log(location));
  }
  // Fewer runs than this give too few forecast errors to choose a weight by.
  constexpr std::size_t kMinRuns = 8;
  if (logs.size() < std::max(settings.min_history, kMinRuns)) return std::nullopt;
  // The first steps forecast from too little to judge a smoothing weight by.
  constexpr std::size_t kWarmUp = 3;
  std::vector<Forecast> candidates;
  for (double smoothing : {0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0}) {
    double level = logs[0];
    std::vector<double> errors;
    for (std::size_t i = 1; i < logs.size(); ++i) {
      double error = logs[i] - level;
      if (i >= kWarmUp) errors.push_back(std::abs(error));
      // Until 1/(i+1) drops below the weight, the level is the mean of the
      // runs so far: otherwise a small weight leaves the first run in the
      // forecast for dozens of runs.
      level += std::max(smoothing, 1.0 / static_cast<double>(i + 1)) * error;
    }
    // The root mean square error, each error capped at 2.5 robust sigmas:
    // nearly as precise as the plain one for normal noise (the median
    // absolute error wastes most of a short history, and its noise becomes
    // false alarms), yet a one-off run moves it little.
    double cap = 2.5 * 1.4826 * median(errors), squares = 0;
    for (double e : errors) squares += std::min(e, cap) * std::min(e, cap);
    candidates.push_back(
        {std::exp(level), std::sqrt(squares / static_cast<double>(errors.size())), smoothing, logs.size()});
  }
  // The smoothest weight whose error is within one standard error of the
  // least (the RMS of k errors has a relative standard error of about
  // 1/sqrt(2k)). Taking the least outright favours, in a stable history, a
  // weight whose errors were small by chance, and its scale then understates
  // the noise: the false alarms of the far tail.
  double least =
      std::min_element(candidates.begin(), candidates.end(), [](const Forecast& a, const Forecast& b) {
        return a.scale < b.scale;
      })->scale;
  double within = least * (1 + 1 / std::sqrt(2.0 * static_cast<double>(logs.size() - kWarmUp)));
  const Forecast& chosen = *std::find_if(candidates.begin(), candidates.end(),
                                         [&](const Forecast& f) { return f.scale <= within; });
  if (chosen.scale <= 0) return std::nullopt;  // a history of identical values has no spread to judge by
  return chosen;
}

Comparison compare_times_with_history(const Timing& head, const Timing& base,
                                      std::span<const double> history_locations_ns, double min_threshold,
                                      const DetectionSettings& settings) {
  std::optional<Forecast> forecast = forecast_level(history_locations_ns, settings);
  if (!forecast || head.samples_ns.empty()) {
    return compare_times(head, base, noise_aware_threshold(history_locations_ns, min_threshold, settings),
                         settings);
  }
  Comparison result = compare_times(head, base, min_threshold, settings);
  if (result.head_samples == 0 || result.base_samples == 0) return result;
  double change = std::log(location(head, settings) / forecast->level_ns);
  double z = change / forecast->scale;
  double floor = std::log1p(min_threshold);
  bool agrees_slower = result.p_value < settings.history_alpha && result.ratio > 1;
  bool agrees_faster = result.p_value < settings.history_alpha && result.ratio < 1;
  if (z > settings.history_z && change > floor && agrees_slower) {
    result.status = ChangeStatus::regression;
  } else if (z < -settings.history_z && change < -floor && agrees_faster) {
    result.status = ChangeStatus::improvement;
  } else {
    result.status = ChangeStatus::unchanged;
  }
  result.threshold = std::max(min_threshold, std::expm1(settings.history_z * forecast->scale));
  char text[160];
  std::snprintf(text, sizeof(text), "decided against the level forecast from %zu runs: %+.2f%% (%.1f sigma)",
                forecast->runs, 100 * std::expm1(change), z);
  result.note = result.note.empty() ? text : result.note + "; " + text;
  return result;
}

Comparison compare_speedups(const Timing& head_candidate, const Timing& head_baseline,
                            const Timing& base_candidate, const Timing& base_baseline, double threshold,
                            const DetectionSettings& settings) {
  // Sample i of each implementation was taken in the same interleaved round,
  // so their ratio is one speedup observation; a round with either sample
  // throttled is dropped.
  auto speedups = [&](const Timing& candidate, const Timing& baseline, std::size_t& excluded) {
    std::set<std::int64_t> throttled(candidate.throttled.begin(), candidate.throttled.end());
    throttled.insert(baseline.throttled.begin(), baseline.throttled.end());
    std::size_t rounds = std::min(candidate.samples_ns.size(), baseline.samples_ns.size());
    std::vector<double> kept, all;
    for (std::size_t i = 0; i < rounds; ++i) {
      double speedup = baseline.samples_ns[i] / candidate.samples_ns[i];
      all.push_back(speedup);
      if (!throttled.contains(static_cast<std::int64_t>(i))) kept.push_back(speedup);
    }
    if (kept.size() < settings.min_samples) return all;
    excluded += rounds - kept.size();
    return kept;
  };
  std::size_t excluded = 0;
  std::vector<double> head = speedups(head_candidate, head_baseline, excluded);
  std::vector<double> base = speedups(base_candidate, base_baseline, excluded);
  Comparison result = compare(std::move(head), std::move(base), threshold, false, settings);
  result.excluded_throttled = excluded;
  result.note = throttle_note(excluded);
  return result;
}

}  // namespace kw::common
