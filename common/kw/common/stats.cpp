#include "kw/common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace kw::common {

namespace {

void require_nonempty(std::span<const double> samples, const char* what) {
  if (samples.empty()) throw std::invalid_argument(std::string(what) + ": no samples");
}

std::vector<double> sorted_copy(std::span<const double> samples) {
  std::vector<double> copy(samples.begin(), samples.end());
  std::sort(copy.begin(), copy.end());
  return copy;
}

double sorted_quantile(const std::vector<double>& sorted, double q) {
  double h = (static_cast<double>(sorted.size()) - 1) * q;
  auto low = static_cast<std::size_t>(std::floor(h));
  std::size_t high = std::min(low + 1, sorted.size() - 1);
  return sorted[low] + (h - static_cast<double>(low)) * (sorted[high] - sorted[low]);
}

}  // namespace

double median(std::span<const double> samples) {
  require_nonempty(samples, "median");
  return quantile(samples, 0.5);
}

double median_sorted(std::span<const double> sorted) {
  require_nonempty(sorted, "median");
  std::size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : sorted[n / 2 - 1] + 0.5 * (sorted[n / 2] - sorted[n / 2 - 1]);
}

double quantile(std::span<const double> samples, double q) {
  require_nonempty(samples, "quantile");
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("quantile: q must be in [0, 1]");
  return sorted_quantile(sorted_copy(samples), q);
}

double mad(std::span<const double> samples) {
  double center = median(samples);
  std::vector<double> deviations;
  deviations.reserve(samples.size());
  for (double s : samples) deviations.push_back(std::abs(s - center));
  return median(deviations);
}

double trimmed_mean(std::span<const double> samples) {
  require_nonempty(samples, "trimmed_mean");
  std::vector<double> sorted = sorted_copy(samples);
  std::size_t cut = sorted.size() / 4;
  double sum = 0;
  for (std::size_t i = cut; i < sorted.size() - cut; ++i) sum += sorted[i];
  return sum / static_cast<double>(sorted.size() - 2 * cut);
}

double relative_noise(std::span<const double> samples) {
  double center = median(samples);
  if (center == 0) return 0;
  return 1.4826 * mad(samples) / std::abs(center);
}

std::pair<double, double> median_interval(std::span<const double> samples, double confidence) {
  std::vector<double> sorted = sorted_copy(samples);
  require_nonempty(sorted, "median_interval");
  auto n = static_cast<double>(sorted.size());
  double half_width = normal_quantile(0.5 + confidence / 2) * std::sqrt(n) / 2;
  auto low = static_cast<std::ptrdiff_t>(std::floor(n / 2 - half_width));
  auto high = static_cast<std::ptrdiff_t>(std::ceil(n / 2 + half_width));
  low = std::clamp<std::ptrdiff_t>(low, 0, static_cast<std::ptrdiff_t>(sorted.size()) - 1);
  high = std::clamp<std::ptrdiff_t>(high, 0, static_cast<std::ptrdiff_t>(sorted.size()) - 1);
  return {sorted[static_cast<std::size_t>(low)], sorted[static_cast<std::size_t>(high)]};
}

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("normal_quantile: p must be in (0, 1)");
  // Acklam's rational approximation, refined by one Halley step on erfc.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = normal_cdf(x) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

double binomial_upper_bound(std::int64_t events, std::int64_t trials, double confidence) {
  if (trials <= 0) return 1.0;
  if (events < 0 || events > trials)
    throw std::invalid_argument("binomial_upper_bound: events out of 0..trials");
  if (events >= trials) return 1.0;
  // P(X <= events | trials, p) falls as p grows: the bound is the p where it
  // reaches 1 - confidence, found by bisection on the CDF summed in logs.
  const auto n = static_cast<double>(trials);
  auto cdf = [&](double p) {
    double sum = 0;
    for (std::int64_t k = 0; k <= events; ++k) {
      const auto kd = static_cast<double>(k);
      sum += std::exp(std::lgamma(n + 1) - std::lgamma(kd + 1) - std::lgamma(n - kd + 1) + kd * std::log(p) +
                      (n - kd) * std::log1p(-p));
    }
    return sum;
  };
  double low = static_cast<double>(events) / n, high = 1.0;
  for (int step = 0; step < 100; ++step) {
    const double mid = (low + high) / 2;
    (cdf(mid) > 1 - confidence ? low : high) = mid;
  }
  return high;
}

}  // namespace kw::common
