#include "kw/common/detection.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <set>
#include <stdexcept>

#include "kw/common/stats.hpp"

namespace kw::common {

namespace {

double mean(std::span<const double> values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

std::vector<double> logs_of(std::span<const double> values) {
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) {
    if (!(v > 0)) throw std::invalid_argument("detection: locations must be > 0");
    out.push_back(std::log(v));
  }
  return out;
}

double sum_of_squares(std::span<const double> values) {
  double m = mean(values), total = 0;
  for (double v : values) total += (v - m) * (v - m);
  return total;
}

// Weight of a learned prior: its own degrees of freedom, but never so many
// that a run's own evidence cannot move it; the conservative default counts
// as prior_df.
double prior_weight(double learned_df, const DetectionSettings& settings) {
  return learned_df > 0 ? std::clamp(learned_df, 2.0, 4 * settings.prior_df) : settings.prior_df;
}

// log Beta(a, b) incomplete ratio by Lentz's continued fraction.
double incomplete_beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    double step = d * c;
    h *= step;
    if (std::abs(step - 1) < 1e-15) break;
  }
  return h;
}

// Regularized incomplete beta I_x(a, b).
double regularized_incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * incomplete_beta_fraction(a, b, x) / a;
  return 1 - front * incomplete_beta_fraction(b, a, 1 - x) / b;
}

// Whether a job's own between-replicate spread is too wide to be the prior's
// (an F test of their variances at prior_conflict_alpha). The prior stands
// for a GPU kernel's 1-1.5%; a case that spreads 15-25% (a CPU benchmark
// whose core is shared now and then) pooled with it gets an sd that the
// data contradict and an interval too narrow: on a busy 2-core VM, 1.5% of
// such A/A comparisons were flagged at the first Holm step of four (0.25%
// nominal), 0.9% with the prior set aside (rule 2).
bool prior_conflicts(double data_sd, double data_df, double prior_sd, double prior_df,
                     const DetectionSettings& settings) {
  if (!(data_df > 0) || !(prior_df > 0) || !(prior_sd > 0)) return false;
  const double f = (data_sd * data_sd) / (prior_sd * prior_sd);
  // P(F(data_df, prior_df) > f)
  const double tail =
      regularized_incomplete_beta(prior_df / 2, data_df / 2, prior_df / (prior_df + data_df * f));
  return tail < settings.prior_conflict_alpha;
}

// An outlier replicate (another process on the GPU, a stall, a clock
// event) moves a mean of four by a quarter of its size: one further than
// outlier_sds of the case's between-replicate spread (never less than 3%)
// from its side's median is left out, fewer than half of a side. A real
// change moves every replicate of a side, so it is never what is left out.
// Fewer than half, not a quarter: the tiny cases on the H100 now and then
// have a stalled replicate (2-8x) and a fast one (-15%) in the same run of
// six, and with only the stall left out the fast one alone moved the run by
// -2.6% (a main run of the H100 A/A series, then a false `improvement`). The
// median stays among the kept, so the majority decides.
// Only a replicate with few others near it (within the same limit) is an
// outlier. Some cases have two levels a process can settle at
// (attention/fp16/d64/b1h1s64: 6.25 and 6.85 us, 10% apart, in both sides
// of an A/A job; Google Benchmark cases on a 2-core VM whose other core is
// busy or idle: 12 and 20 us), and leaving out one side's minority level and
// not the other side's made such jobs 9-30% changes. So an A/B job's
// replicates are judged against `job`, both sides together (rule 2; rule 1
// judged each side against itself): its median, and its replicates for
// "near". `together`: how many replicates of `job` within the limit, itself
// among them, still make an outlier.
//  - A stored run: max(2, n/5). A level it reaches rarely is left out.
//  - An A/B job: 1, a replicate with no other near it (rule 3; rule 2 took
//    max(2, n/5) there too). With a real change on a host with two speeds
//    the far ends of the job are one side's alone: the head's slow level
//    above everything the base reaches, the base's fast one below
//    everything the head reaches. Left out as levels the job reaches rarely,
//    they shrank the change: a Google Benchmark case made 11% slower, its
//    replicates 15% apart by speed, lost 4 of its 10 head replicates and
//    measured +6.9% against +11% in its first pass. Judged so, such a
//    slowdown came out unchanged in 0.29% of the jobs resampled from
//    tests/data/gbench-busy-host/sort-jobs.json, 0.025% by rule 3
//    (GbenchOnABusyHost.ATenPercent...). A stall or another process on the
//    GPU is alone and still left out.
std::vector<bool> outlier_mask(const std::vector<double>& logs, std::span<const double> job,
                               double replicate_sd, const DetectionSettings& settings, std::size_t together) {
  std::vector<bool> drop(logs.size(), false);
  if (logs.size() < 4) return drop;
  std::vector<double> sorted(job.begin(), job.end());
  std::sort(sorted.begin(), sorted.end());
  double center = median_sorted(sorted);
  double limit = std::max(settings.outlier_sds * replicate_sd, std::log1p(settings.outlier_floor));
  auto near = [&](std::size_t i) {
    return static_cast<std::size_t>(std::count_if(
        job.begin(), job.end(), [&](double other) { return std::abs(other - logs[i]) <= limit; }));
  };
  std::vector<std::pair<double, std::size_t>> far;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (std::abs(logs[i] - center) > limit && near(i) <= together)
      far.emplace_back(std::abs(logs[i] - center), i);
  }
  std::sort(far.rbegin(), far.rend());
  far.resize(std::min(far.size(), (logs.size() - 1) / 2));
  for (const auto& [_, i] : far) drop[i] = true;
  return drop;
}

// A stored run's `together`: a level it reaches rarely is left out.
std::size_t rare_level(std::size_t replicates) {
  return std::max<std::size_t>(2, replicates / 5);
}
// An A/B job's: a replicate alone.
constexpr std::size_t kAlone = 1;

std::vector<double> without_outliers(const std::vector<double>& logs, std::span<const double> job,
                                     double replicate_sd, const DetectionSettings& settings,
                                     std::size_t together, std::size_t& dropped) {
  std::vector<bool> drop = outlier_mask(logs, job, replicate_sd, settings, together);
  std::vector<double> kept;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (!drop[i]) kept.push_back(logs[i]);
  }
  dropped += logs.size() - kept.size();
  return kept;
}

// The replicates a stored run's location and clock are made of: outliers
// left out at the default between-replicate spread (beyond 9% of the
// median), as the head's are, so one stalled replicate cannot move a run of
// the history by several times the change it is meant to show.
std::vector<bool> stored_run_outliers(const std::vector<double>& logs) {
  return outlier_mask(logs, logs, default_noise().replicate_sd, DetectionSettings{}, rare_level(logs.size()));
}

// The log locations of the replicates a stored run keeps.
std::vector<double> stored_run_kept(const std::vector<double>& logs) {
  std::size_t dropped = 0;
  return without_outliers(logs, logs, default_noise().replicate_sd, DetectionSettings{},
                          rare_level(logs.size()), dropped);
}

// A run's level as stored: the mean log location of the replicates it keeps,
// and how many it left out.
std::pair<double, std::size_t> stored_run_level(const std::vector<double>& logs) {
  std::vector<double> kept = stored_run_kept(logs);
  return {mean(kept), logs.size() - kept.size()};
}

std::string outlier_note(std::size_t dropped) {
  return dropped == 0 ? std::string() : "; " + std::to_string(dropped) + " outlier replicate(s) left out";
}

void finish_test(CaseTest& test, const DetectionSettings& settings) {
  double t = test.se > 0 ? test.effect / test.se : 0;
  test.p_value = test.se > 0 ? student_t_two_sided_p(t, test.df) : 1;
  double half = student_t_quantile(1 - settings.run_alpha, test.df) * test.se;
  test.ratio = std::exp(test.effect);
  test.lower = std::exp(test.effect - half);
  test.upper = std::exp(test.effect + half);
}

std::string percent(double log_ratio) {
  char text[32];
  std::snprintf(text, sizeof(text), "%+.2f%%", 100 * std::expm1(log_ratio));
  return text;
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
    case ChangeStatus::inconclusive:
      return "inconclusive";
    case ChangeStatus::no_baseline:
      return "no-baseline";
  }
  return "unchanged";
}

std::string_view to_string(CaseTest::Method method) {
  switch (method) {
    case CaseTest::Method::none:
      return "none";
    case CaseTest::Method::ab:
      return "ab";
    case CaseTest::Method::history:
      return "history";
    case CaseTest::Method::baseline_run:
      return "baseline-run";
  }
  return "none";
}

NoiseModel default_noise() {
  return {};
}

double student_t_two_sided_p(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("student_t: df must be > 0");
  if (!std::isfinite(t)) return 0;
  return regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t));
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("student_t_quantile: p must be in (0, 1)");
  if (!(df > 0)) throw std::invalid_argument("student_t_quantile: df must be > 0");
  // The t whose two-sided tail is 1 - p. Every comparison needs one, at its
  // own df: Newton's method on the p-value (its slope is twice the density)
  // takes a few steps where bisection took a hundred. The p-value is convex
  // for t > 0, so from t = 0 each step lands short of the root; the bracket
  // only guards against rounding near it.
  const double tail = 1 - p;
  const double log_density_scale =
      std::lgamma((df + 1) / 2) - std::lgamma(df / 2) - 0.5 * std::log(df * std::numbers::pi);
  double lo = 0, hi = std::numeric_limits<double>::infinity(), t = 0;
  for (int i = 0; i < 200; ++i) {
    const double excess = student_t_two_sided_p(t, df) - tail;
    if (excess == 0) return t;
    (excess > 0 ? lo : hi) = t;
    const double density = std::exp(log_density_scale - (df + 1) / 2 * std::log1p(t * t / df));
    double next = t + excess / (2 * density);
    if (!(next > lo && next < hi)) next = std::isfinite(hi) ? (lo + hi) / 2 : 2 * lo + 1;
    if (std::abs(next - t) <= 1e-14 * next) return next;
    t = next;
  }
  return t;
}

NoiseModel noise_for(NoiseModel noise, ReplicateLocation rule) {
  if (rule == ReplicateLocation::minimum) noise.side_offset_ns = 0;
  return noise;
}

std::string_view to_string(ReplicateLocation rule) {
  return rule == ReplicateLocation::minimum ? "minimum" : "trimmed_mean";
}

std::optional<ReplicateLocation> replicate_location_from(std::string_view name) {
  if (name == "trimmed_mean") return ReplicateLocation::trimmed_mean;
  if (name == "minimum") return ReplicateLocation::minimum;
  return std::nullopt;
}

std::vector<double> replicate_locations(const Timing& timing, const DetectionSettings& settings,
                                        std::optional<std::int64_t> before) {
  if (!timing.replicates.empty() && timing.replicates.size() != timing.samples_ns.size())
    throw std::invalid_argument("replicate_locations: one replicate index per sample");
  std::set<std::int64_t> throttled(timing.throttled.begin(), timing.throttled.end());
  struct Group {
    std::vector<double> kept, all;
  };
  std::map<std::int64_t, Group> groups;
  for (std::size_t i = 0; i < timing.samples_ns.size(); ++i) {
    std::int64_t replicate = timing.replicates.empty() ? 0 : timing.replicates[i];
    if (before && replicate >= *before) continue;
    Group& group = groups[replicate];
    group.all.push_back(timing.samples_ns[i]);
    if (!throttled.contains(static_cast<std::int64_t>(i))) group.kept.push_back(timing.samples_ns[i]);
  }
  std::vector<double> locations;
  for (const auto& [_, group] : groups) {
    const std::vector<double>& samples = group.kept.size() >= settings.min_samples ? group.kept : group.all;
    locations.push_back(timing.rule == ReplicateLocation::minimum
                            ? *std::min_element(samples.begin(), samples.end())
                            : trimmed_mean(samples));
  }
  return locations;
}

std::vector<double> replicate_clocks(const Timing& timing, std::optional<std::int64_t> before) {
  if (timing.sm_mhz.empty()) return {};
  if (timing.sm_mhz.size() != timing.samples_ns.size())
    throw std::invalid_argument("replicate_clocks: one clock per sample");
  if (!timing.replicates.empty() && timing.replicates.size() != timing.samples_ns.size())
    throw std::invalid_argument("replicate_clocks: one replicate index per sample");
  std::map<std::int64_t, std::pair<double, std::size_t>> sums;
  for (std::size_t i = 0; i < timing.sm_mhz.size(); ++i) {
    std::int64_t replicate = timing.replicates.empty() ? 0 : timing.replicates[i];
    if (before && replicate >= *before) continue;
    sums[replicate].first += timing.sm_mhz[i];
    ++sums[replicate].second;
  }
  std::vector<double> clocks;
  for (const auto& [_, sum] : sums) clocks.push_back(sum.first / static_cast<double>(sum.second));
  return clocks;
}

double location(std::span<const double> replicate_locations) {
  if (replicate_locations.empty()) throw std::invalid_argument("location: no samples");
  return std::exp(stored_run_level(logs_of(replicate_locations)).first);
}

double location(const Timing& timing, const DetectionSettings& settings) {
  return location(replicate_locations(timing, settings));
}

std::optional<double> replicate_log_sd(std::span<const double> locations) {
  std::vector<double> kept = stored_run_kept(logs_of(locations));
  if (kept.size() < 2) return std::nullopt;
  return std::sqrt(sum_of_squares(kept) / static_cast<double>(kept.size() - 1));
}

PooledSd pool_replicate_sds(std::span<const double> sds, std::span<const std::int64_t> counts) {
  double squares = 0, df = 0;
  for (std::size_t i = 0; i < sds.size() && i < counts.size(); ++i) {
    if (counts[i] < 2 || !std::isfinite(sds[i]) || sds[i] < 0) continue;
    squares += static_cast<double>(counts[i] - 1) * sds[i] * sds[i];
    df += static_cast<double>(counts[i] - 1);
  }
  return df > 0 ? PooledSd{std::sqrt(squares / df), df} : PooledSd{};
}

PooledSd shrink(PooledSd estimate, double prior_sd, double prior_df) {
  double df = estimate.df + prior_df;
  if (df <= 0) return {prior_sd, 0};
  return {std::sqrt((estimate.df * estimate.sd * estimate.sd + prior_df * prior_sd * prior_sd) / df), df};
}

std::optional<Forecast> forecast_level(std::span<const double> history_locations_ns,
                                       const DetectionSettings& settings) {
  std::vector<double> logs;
  for (double location : history_locations_ns) {
    if (location > 0) logs.push_back(std::log(location));
  }
  if (logs.size() < settings.min_history) return std::nullopt;
  // The first steps forecast from too little to judge a smoothing weight by.
  constexpr std::size_t kWarmUp = 3;
  // A run far off its neighbours (replicates of a stalled process) moves
  // the level by at most `clip`: 3 robust sigmas of the history's own
  // spread. Left whole, one such run pulls a smooth forecast off by a share
  // of it for dozens of runs, and every later head looks changed by that.
  std::vector<double> sorted_logs = logs;
  std::sort(sorted_logs.begin(), sorted_logs.end());
  const double history_median = median_sorted(sorted_logs);
  std::vector<double> deviations;
  for (double x : logs) deviations.push_back(std::abs(x - history_median));
  const double clip = std::max(3 * 1.4826 * median(deviations), 1e-6);
  std::vector<double> first(logs.begin(), logs.begin() + kWarmUp);
  std::sort(first.begin(), first.end());
  std::vector<Forecast> candidates;
  for (double smoothing : {0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0}) {
    double level = first[kWarmUp / 2];  // the median of the first runs: one of them may be far off
    std::vector<double> errors;
    for (std::size_t i = 1; i < logs.size(); ++i) {
      double error = logs[i] - level;
      if (i >= kWarmUp) errors.push_back(std::abs(error));
      // Until 1/(i+1) drops below the weight, the level is the mean of the
      // runs so far: otherwise a small weight leaves the first run in the
      // forecast for dozens of runs.
      level += std::max(smoothing, 1.0 / static_cast<double>(i + 1)) * std::clamp(error, -clip, clip);
    }
    // The root mean square error, far runs included: the median absolute
    // error wastes most of a short history (its noise becomes false alarms),
    // and a case whose run level now and then jumps (a tiny kernel on the
    // H100 by 11% in 1 of 14 main runs) has that in its
    // noise. Capping the errors at 2.5 robust sigmas left those jumps out,
    // and each one in a head was then a false verdict. The level above is
    // clipped, so a far run counts once here, not in every later error.
    const double cap = 2.5 * 1.4826 * median(errors);
    double squares = 0, capped = 0;
    for (double e : errors) {
      squares += e * e;
      capped += std::min(e, cap) * std::min(e, cap);
    }
    const auto n = static_cast<double>(errors.size());
    candidates.push_back({std::exp(level), std::sqrt(squares / n), std::sqrt(capped / n), smoothing,
                          logs.size(), errors.size()});
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

namespace {

struct ClockFit {
  bool applied = false;
  double slope = 0, shift = 0;
  double extra_variance = 0;  // the slope's uncertainty in the effect, per unit of error variance
};

// Moves each replicate's log time to the clock all replicates averaged, with
// one least-squares slope inside the sides.
ClockFit adjust_to_common_clock(std::vector<double>& head, std::vector<double>& base,
                                std::span<const double> head_clocks, std::span<const double> base_clocks,
                                double min_clock_sd) {
  ClockFit fit;
  if (head_clocks.size() != head.size() || base_clocks.size() != base.size() || head.size() < 2 ||
      base.size() < 2)
    return fit;
  for (double mhz : head_clocks)
    if (!(mhz > 0)) return fit;
  for (double mhz : base_clocks)
    if (!(mhz > 0)) return fit;
  std::vector<double> hx = logs_of(head_clocks), bx = logs_of(base_clocks);
  const double hx_mean = mean(hx), bx_mean = mean(bx), hy_mean = mean(head), by_mean = mean(base);
  fit.shift = hx_mean - bx_mean;
  const double sxx = sum_of_squares(hx) + sum_of_squares(bx);
  const double within_df = static_cast<double>(head.size() + base.size()) - 2;
  if (sxx / within_df < min_clock_sd * min_clock_sd) return fit;
  double sxy = 0;
  for (std::size_t i = 0; i < head.size(); ++i) sxy += (hx[i] - hx_mean) * (head[i] - hy_mean);
  for (std::size_t i = 0; i < base.size(); ++i) sxy += (bx[i] - bx_mean) * (base[i] - by_mean);
  fit.slope = std::clamp(sxy / sxx, -1.25, 0.0);
  const double center =
      (hx_mean * static_cast<double>(hx.size()) + bx_mean * static_cast<double>(bx.size())) /
      static_cast<double>(hx.size() + bx.size());
  for (std::size_t i = 0; i < head.size(); ++i) head[i] -= fit.slope * (hx[i] - center);
  for (std::size_t i = 0; i < base.size(); ++i) base[i] -= fit.slope * (bx[i] - center);
  fit.extra_variance = fit.shift * fit.shift / sxx;
  fit.applied = true;
  return fit;
}

}  // namespace

RunClock run_clock(std::span<const double> replicate_locations, std::span<const double> replicate_clocks) {
  RunClock clock;
  if (replicate_clocks.empty() || replicate_clocks.size() != replicate_locations.size()) return clock;
  for (double mhz : replicate_clocks)
    if (!(mhz > 0)) return clock;
  const std::vector<double> all_x = logs_of(replicate_clocks), all_y = logs_of(replicate_locations);
  const std::vector<bool> drop = stored_run_outliers(all_y);
  std::vector<double> x, y;  // the replicates the run's location keeps
  for (std::size_t i = 0; i < all_y.size(); ++i) {
    if (drop[i]) continue;
    x.push_back(all_x[i]);
    y.push_back(all_y[i]);
  }
  const double x_mean = mean(x), y_mean = mean(y);
  clock.mhz = std::exp(x_mean);
  for (std::size_t i = 0; i < x.size(); ++i) {
    clock.sxx += (x[i] - x_mean) * (x[i] - x_mean);
    clock.sxy += (x[i] - x_mean) * (y[i] - y_mean);
  }
  clock.replicates = static_cast<std::int64_t>(x.size());
  return clock;
}

ClockedHistory history_at_clock(std::span<const double> history_locations_ns,
                                std::span<const RunClock> history_clocks, const RunClock& head,
                                const DetectionSettings& settings) {
  ClockedHistory out;
  out.locations_ns.assign(history_locations_ns.begin(), history_locations_ns.end());
  if (!(head.mhz > 0) || history_clocks.size() != history_locations_ns.size()) return out;
  std::vector<std::size_t> clocked;
  for (std::size_t i = 0; i < history_clocks.size(); ++i) {
    if (history_clocks[i].mhz > 0 && history_locations_ns[i] > 0) clocked.push_back(i);
  }
  // A history that only began to report clocks: judged on plain times until
  // enough of it has them to forecast from.
  if (clocked.empty() || (clocked.size() < history_clocks.size() && clocked.size() < settings.min_history))
    return out;
  double sxx = head.sxx, sxy = head.sxy;
  double df = static_cast<double>(std::max<std::int64_t>(head.replicates - 1, 0));
  double log_mhz_sum = 0;
  for (std::size_t i : clocked) {
    sxx += history_clocks[i].sxx;
    sxy += history_clocks[i].sxy;
    df += static_cast<double>(std::max<std::int64_t>(history_clocks[i].replicates - 1, 0));
    log_mhz_sum += std::log(history_clocks[i].mhz);
  }
  if (!(df > 0) || sxx / df < settings.min_clock_sd * settings.min_clock_sd) return out;
  out.slope = std::clamp(sxy / sxx, -1.25, 0.0);
  out.sxx = sxx;
  out.mean_log_mhz = log_mhz_sum / static_cast<double>(clocked.size());
  const double reference = std::log(head.mhz);
  out.locations_ns.clear();
  for (std::size_t i : clocked) {
    out.locations_ns.push_back(history_locations_ns[i] *
                               std::exp(-out.slope * (std::log(history_clocks[i].mhz) - reference)));
  }
  out.left_out = history_clocks.size() - clocked.size();
  out.adjusted = true;
  return out;
}

CaseTest test_ab(std::span<const double> head_locations, std::span<const double> base_locations,
                 const NoiseModel& noise, const DetectionSettings& settings,
                 std::span<const double> head_clocks, std::span<const double> base_clocks) {
  CaseTest test;
  test.head_replicates = head_locations.size();
  test.base_replicates = base_locations.size();
  if (head_locations.empty() || base_locations.empty()) {
    test.note = "no measurement of both base and head";
    return test;
  }
  test.method = CaseTest::Method::ab;
  std::vector<double> head_logs = logs_of(head_locations), base_logs = logs_of(base_locations);
  const double side_offset = noise.side_offset_ns / std::exp(mean(base_logs));
  ClockFit clock =
      adjust_to_common_clock(head_logs, base_logs, head_clocks, base_clocks, settings.min_clock_sd);
  test.clock_adjusted = clock.applied;
  test.clock_slope = clock.slope;
  test.clock_shift = clock.shift;
  const double prior_sd = clock.applied ? noise.clock_adjusted_sd : noise.replicate_sd;
  const double prior_df = clock.applied ? settings.prior_df : prior_weight(noise.replicate_df, settings);
  std::size_t dropped = 0;
  std::vector<double> job = head_logs;
  job.insert(job.end(), base_logs.begin(), base_logs.end());
  std::vector<double> head = without_outliers(head_logs, job, prior_sd, settings, kAlone, dropped);
  std::vector<double> base = without_outliers(base_logs, job, prior_sd, settings, kAlone, dropped);
  test.head_replicate_sd = replicate_log_sd(head_locations).value_or(0);
  test.base_replicate_sd = replicate_log_sd(base_locations).value_or(0);
  test.effect = mean(head) - mean(base);
  double data_df = static_cast<double>(head.size() + base.size()) - 2 - (clock.applied ? 1 : 0);
  double data_sd = data_df > 0 ? std::sqrt((sum_of_squares(head) + sum_of_squares(base)) / data_df) : 0;
  const bool prior_conflict = prior_conflicts(data_sd, data_df, prior_sd, prior_df, settings);
  PooledSd pooled = prior_conflict ? PooledSd{data_sd, data_df}
                                   : shrink({data_sd, std::max(data_df, 0.0)}, prior_sd, prior_df);
  test.df = pooled.df;
  // The side offset is a variance both sides add, known rather than
  // estimated: it adds no degrees of freedom and no replicates shrink it.
  test.se = std::sqrt(pooled.sd * pooled.sd *
                          (1 / static_cast<double>(head.size()) + 1 / static_cast<double>(base.size()) +
                           clock.extra_variance) +
                      2 * side_offset * side_offset);
  finish_test(test, settings);
  char text[300];
  std::snprintf(text, sizeof(text),
                "A/B in one job: %zu head vs %zu base replicates, %s, between-replicate sd %.2f%% (%.0f df)",
                head.size(), base.size(), percent(test.effect).c_str(), 100 * pooled.sd, pooled.df);
  test.note = text;
  // Said where it weighs: a fifth of the test's error or more.
  if (side_offset * side_offset * 2 >= 0.04 * test.se * test.se) {
    std::snprintf(text, sizeof(text), ", between-side offset %.0f ns (%.2f%%) a side", noise.side_offset_ns,
                  100 * side_offset);
    test.note += text;
  }
  if (clock.applied) {
    std::snprintf(text, sizeof(text),
                  "; at equal SM clock (time ~ clock^%.2f; the head ran at %s the base's clock)", clock.slope,
                  percent(clock.shift).c_str());
    test.note += text;
  }
  if (prior_conflict) {
    std::snprintf(text, sizeof(text), "; the job's own spread, not the %.2f%% prior (far wider than it)",
                  100 * prior_sd);
    test.note += text;
  }
  test.note += outlier_note(dropped);
  return test;
}

CaseTest test_history(std::span<const double> head_locations, std::span<const double> history_locations_ns,
                      const NoiseModel& noise, const DetectionSettings& settings,
                      std::span<const double> head_clocks, std::span<const RunClock> history_clocks) {
  CaseTest test;
  test.head_replicates = head_locations.size();
  const bool with_clocks = history_clocks.size() == history_locations_ns.size();
  std::vector<double> stored;
  std::vector<RunClock> stored_clocks;
  for (std::size_t i = 0; i < history_locations_ns.size(); ++i) {
    if (!(history_locations_ns[i] > 0)) continue;
    stored.push_back(history_locations_ns[i]);
    if (with_clocks) stored_clocks.push_back(history_clocks[i]);
  }
  if (head_locations.empty() || stored.empty()) {
    test.note = head_locations.empty() ? "no head measurement" : "no baseline run";
    return test;
  }
  const RunClock head_clock = run_clock(head_locations, head_clocks);
  const ClockedHistory clocked = history_at_clock(stored, stored_clocks, head_clock, settings);
  const std::vector<double>& history = clocked.locations_ns;
  // The slope's own uncertainty, carried to the distance between the head's
  // clock and the history's.
  double slope_variance = 0;
  if (clocked.adjusted) {
    test.clock_adjusted = true;
    test.clock_slope = clocked.slope;
    test.clock_shift = std::log(head_clock.mhz) - clocked.mean_log_mhz;
    slope_variance =
        test.clock_shift * test.clock_shift * noise.clock_adjusted_sd * noise.clock_adjusted_sd / clocked.sxx;
  }
  // The head's level as its run will be stored (location()): what it is
  // compared with was made the same way.
  const auto [head_level, dropped] = stored_run_level(logs_of(head_locations));
  test.head_replicate_sd = replicate_log_sd(head_locations).value_or(0);
  // Cases differ in their between-run spread (0.1-1.3% on the H100), so the
  // GPU model's prior is worth no more than prior_df runs of the case's own
  // history: with 32 (what 76 learned cases gave), a noisier case's own
  // thirty runs were outweighed, and the detector bench's main runs had
  // more false verdicts than the 1% they are allowed.
  double weight = std::min(prior_weight(noise.run_df, settings), settings.prior_df);
  // The prior of this case's between-run sd: the GPU model's, or what the
  // case's own replicate spread makes of a run of the head's size, whichever
  // is larger. On the H100 a run's level scatters as its replicates' mean
  // would (run sd / (replicate sd / sqrt(n)) has a median of 1.0 over the 56
  // cases of ten H100 main runs, tools/run_spread.py), and the GPU
  // model's sd is the median case's: a tiny kernel (replicates 2% apart) was
  // judged with half its spread, and an A/A run flagged it.
  // Only for a head of replicates, with a spread learned from them: a report
  // of one replicate (an older agent's) is one run, and the GPU model's
  // between-run sd is its prior.
  const double head_kept = static_cast<double>(head_locations.size() - dropped);
  const double replicate_run_sd =
      head_kept >= 2 && noise.replicate_df > 0 ? noise.replicate_sd / std::sqrt(head_kept) : 0;
  char text[300];
  if (std::optional<Forecast> forecast = forecast_level(history, settings)) {
    test.method = CaseTest::Method::history;
    // A one-step error carries the forecast's own noise too: a smoothed
    // level of weight w has w / (2 - w) of a run's variance.
    const double prior_sd = std::max(
        noise.run_sd, replicate_run_sd * std::sqrt(1 + forecast->smoothing / (2 - forecast->smoothing)));
    PooledSd scale = shrink({forecast->scale, static_cast<double>(forecast->errors)}, prior_sd, weight);
    test.effect = head_level - std::log(forecast->level_ns);
    test.se = std::sqrt(scale.sd * scale.sd + slope_variance);
    test.df = scale.df;
    test.base_replicates = forecast->runs;
    finish_test(test, settings);
    std::snprintf(text, sizeof(text),
                  "against the level forecast from %zu runs: %s, between-run sd %.2f%% (%.0f df)",
                  forecast->runs, percent(test.effect).c_str(), 100 * scale.sd, scale.df);
  } else {
    // Too short a history to learn its own spread: the mean of its newest
    // runs, judged with the between-run prior alone.
    test.method = CaseTest::Method::baseline_run;
    std::size_t n = std::min<std::size_t>(history.size(), 5);
    std::vector<double> newest = logs_of(std::span<const double>(history).last(n));
    const double run_sd = std::max(noise.run_sd, replicate_run_sd);
    test.effect = head_level - mean(newest);
    test.se = std::sqrt(run_sd * run_sd * (1 + 1 / static_cast<double>(n)) + slope_variance);
    test.df = weight;
    test.base_replicates = n;
    finish_test(test, settings);
    std::snprintf(text, sizeof(text),
                  "against the mean of %zu stored run(s): %s, between-run prior sd %.2f%%", n,
                  percent(test.effect).c_str(), 100 * run_sd);
  }
  test.note = text;
  if (clocked.adjusted) {
    std::snprintf(text, sizeof(text),
                  "; at equal SM clock (time ~ clock^%.2f; the head ran at %s the history's clock)",
                  clocked.slope, percent(test.clock_shift).c_str());
    test.note += text;
    if (clocked.left_out > 0)
      test.note += "; " + std::to_string(clocked.left_out) + " run(s) without clocks left out";
  }
  test.note += outlier_note(dropped);
  return test;
}

bool open_question(const CaseTest& test, double min_threshold, const DetectionSettings& settings) {
  if (std::abs(test.effect) > std::log1p(min_threshold)) return true;
  const double wide = std::log1p(settings.resolution * min_threshold);
  return test.method == CaseTest::Method::ab && (std::log(test.upper) > wide || std::log(test.lower) < -wide);
}

Decision decide(std::span<const CaseTest> tests, std::span<const double> min_thresholds,
                const DetectionSettings& settings) {
  if (min_thresholds.size() != tests.size()) throw std::invalid_argument("decide: one threshold per test");
  Decision decision;
  decision.statuses.assign(tests.size(), ChangeStatus::no_baseline);
  decision.held_back.assign(tests.size(), false);
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    if (tests[i].method != CaseTest::Method::none) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tests[a].p_value < tests[b].p_value; });
  const double m = static_cast<double>(order.size());
  bool rejecting = true;
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const std::size_t i = order[rank];
    const CaseTest& test = tests[i];
    rejecting = rejecting && test.p_value <= settings.run_alpha / (m - static_cast<double>(rank));
    const double floor = std::log1p(min_thresholds[i]);
    ChangeStatus status = open_question(test, min_thresholds[i], settings) ? ChangeStatus::inconclusive
                                                                           : ChangeStatus::unchanged;
    if (rejecting && test.effect > floor) status = ChangeStatus::regression;
    if (rejecting && test.effect < -floor) status = ChangeStatus::improvement;
    decision.statuses[i] = status;
    decision.held_back[i] = status == ChangeStatus::inconclusive && test.p_value <= settings.run_alpha;
    decision.regression = decision.regression || status == ChangeStatus::regression;
    decision.improvement = decision.improvement || status == ChangeStatus::improvement;
  }
  return decision;
}

std::optional<double> detectable_change(const CaseTest& test, double min_threshold, std::size_t comparisons,
                                        const DetectionSettings& settings, double power) {
  if (test.method == CaseTest::Method::none || !(test.se > 0) || !(test.df > 0)) return std::nullopt;
  const double alpha = settings.run_alpha / static_cast<double>(std::max<std::size_t>(comparisons, 1));
  const double critical = student_t_quantile(1 - alpha, test.df) * test.se;
  // One-sided: the estimate falls short of the truth by t_power se with probability 1 - power.
  const double shortfall = student_t_quantile(2 * power - 1, test.df) * test.se;
  return std::expm1(std::max(critical, std::log1p(min_threshold)) + shortfall);
}

bool needs_confirmation(const CaseTest& test, double min_threshold, const DetectionSettings& settings) {
  return test.method != CaseTest::Method::none && test.p_value < settings.screen_alpha &&
         std::abs(test.effect) > 0.5 * std::log1p(min_threshold);
}

}  // namespace kw::common
