// Robust statistics for benchmark samples: location, spread, and the two tests
// regression detection rests on (a distribution-free interval for the ratio of
// two timing distributions, and the Mann-Whitney U test).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace kw::common {

// All functions take samples by span and never modify them. Empty input throws
// std::invalid_argument.
double median(std::span<const double> samples);
// Linear interpolation between order statistics (Hyndman & Fan type 7, the
// default of R's quantile() and NumPy's percentile()).
double quantile(std::span<const double> samples, double q);
// Median absolute deviation from the median, unscaled.
double mad(std::span<const double> samples);
// Mean of the middle half (25% trimmed from each end): a run's location that
// is steadier than the median when the samples are bimodal.
double trimmed_mean(std::span<const double> samples);
// 1.4826 * MAD / median: a robust coefficient of variation (0.01 = 1% noise).
double relative_noise(std::span<const double> samples);

struct MannWhitney {
  double u = 0;        // U of the first sample: #(x > y) + 0.5 #(x == y)
  double z = 0;        // normal score (0 when exact)
  double p_value = 1;  // two-sided
  bool exact = false;  // exact null distribution (small samples, no ties)
};
MannWhitney mann_whitney(std::span<const double> x, std::span<const double> y);

struct ShiftEstimate {
  double estimate = 0;  // Hodges-Lehmann: median of all pairwise x_i - y_j
  double lower = 0;
  double upper = 0;
  double confidence = 0;  // achieved confidence of [lower, upper]
};
// Hodges-Lehmann shift of x relative to y with the distribution-free interval
// from the Mann-Whitney null distribution (as R's wilcox.test(conf.int=TRUE)).
ShiftEstimate hodges_lehmann_shift(std::span<const double> x, std::span<const double> y,
                                   double confidence = 0.95);

struct RatioEstimate {
  double ratio = 1;     // median(x) / median(y)
  double hl_ratio = 1;  // exp(HL shift of log x vs log y)
  double lower = 1;
  double upper = 1;
  double confidence = 0;
};
// Ratio of x's times to y's times: the shift estimate on log-times, mapped back.
// Samples must be > 0.
RatioEstimate ratio_of_medians(std::span<const double> x, std::span<const double> y,
                               double confidence = 0.95);

// The same three on samples already sorted ascending (detection sorts each
// side once and reuses it).
MannWhitney mann_whitney_sorted(std::span<const double> x, std::span<const double> y);
ShiftEstimate hodges_lehmann_shift_sorted(std::span<const double> x, std::span<const double> y,
                                          double confidence);
double median_sorted(std::span<const double> sorted);

// Distribution-free interval for the median: the order statistics whose
// ranks bound it with the given confidence (normal approximation to the
// binomial, n/2 -+ z sqrt(n)/2). Returns {low, high}.
std::pair<double, double> median_interval(std::span<const double> samples, double confidence = 0.95);

// Standard normal helpers (exposed for tests and the detector).
double normal_cdf(double z);
double normal_quantile(double p);

// P(U <= u) under H0 for sample sizes m, n with no ties (exact); throws when
// m * n is too large to tabulate (> 250000).
double mann_whitney_cdf(std::size_t m, std::size_t n, double u);

}  // namespace kw::common
