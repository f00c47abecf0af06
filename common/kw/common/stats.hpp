// Robust statistics of benchmark samples: location, spread, and the
// distribution-free interval of a median (the dashboard's bands). The
// regression rule itself is in detection.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
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

double median_sorted(std::span<const double> sorted);  // samples already sorted ascending

// Distribution-free interval for the median: the order statistics whose
// ranks bound it with the given confidence (normal approximation to the
// binomial, n/2 -+ z sqrt(n)/2). Returns {low, high}.
std::pair<double, double> median_interval(std::span<const double> samples, double confidence = 0.95);

// Standard normal helpers.
double normal_cdf(double z);
double normal_quantile(double p);

// The one-sided upper confidence bound of a rate seen as `events` in
// `trials` (Clopper-Pearson, exact): 0 of n gives about 3/n at 95%. 1 when
// there are no trials: nothing is known.
double binomial_upper_bound(std::int64_t events, std::int64_t trials, double confidence = 0.95);

}  // namespace kw::common
