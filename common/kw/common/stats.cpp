#include "kw/common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

// Exact distribution of U for sizes m, n: probability[u] for u in [0, m*n].
std::vector<double> compute_mann_whitney_pmf(std::size_t m, std::size_t n) {
  if (m * n > 250000) throw std::invalid_argument("mann_whitney_pmf: samples too large for exact");
  // Recurrence p(m, n, u) = m/(m+n) p(m-1, n, u-n) + n/(m+n) p(m, n-1, u),
  // run over a rolling table indexed by (i, j).
  std::vector<std::vector<std::vector<double>>> table(m + 1, std::vector<std::vector<double>>(n + 1));
  for (std::size_t i = 0; i <= m; ++i) {
    for (std::size_t j = 0; j <= n; ++j) {
      std::vector<double>& cell = table[i][j];
      cell.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        cell[0] = 1.0;
        continue;
      }
      double wi = static_cast<double>(i) / static_cast<double>(i + j);
      double wj = static_cast<double>(j) / static_cast<double>(i + j);
      const std::vector<double>& from_i = table[i - 1][j];
      const std::vector<double>& from_j = table[i][j - 1];
      for (std::size_t u = 0; u < cell.size(); ++u) {
        double p = 0;
        if (u >= j && u - j < from_i.size()) p += wi * from_i[u - j];
        if (u < from_j.size()) p += wj * from_j[u];
        cell[u] = p;
      }
    }
    if (i > 0) table[i - 1].clear();  // rows below i-1 are no longer needed
  }
  return table[m][n];
}

// Detection compares many samples of the same sizes: tabulate each (m, n) once per thread.
const std::vector<double>& mann_whitney_pmf(std::size_t m, std::size_t n) {
  thread_local std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> cache;
  auto key = std::make_pair(m, n);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, compute_mann_whitney_pmf(m, n)).first;
  return it->second;
}

// The k-th smallest (1-based) of all x_i - y_j for each k in `ranks`, for x
// and y sorted ascending. The differences form a sorted matrix, so
// #(x_i - y_j <= t) is counted in one O(m + n) merge. A search on t narrows,
// for every rank, a bracket (lo, hi] until it holds about m + n differences,
// which are then listed and selected from: the m * n differences are never
// materialised. Every count narrows every rank's bracket, so the ranks of an
// estimate and its interval share most of the counting.
std::vector<double> kth_pairwise_differences(std::span<const double> x, std::span<const double> y,
                                             std::span<const std::size_t> ranks) {
  const std::size_t m = x.size(), n = y.size();
  auto count_at_most = [&](double t) {
    std::size_t total = 0, j = 0;
    for (std::size_t i = 0; i < m; ++i) {
      while (j < n && y[j] < x[i] - t) ++j;  // first y_j with x_i - y_j <= t
      total += n - j;
    }
    return total;
  };
  struct Bracket {
    double lo, hi;
    std::size_t count_lo, count_hi;
    int steps = 0;
    bool stuck = false;  // (lo, hi] holds ties that no t in between can split
  };
  // Invariant: count(<= lo) < k <= count(<= hi). The first bracket is
  // (-inf, inf]: the smallest and largest differences as computed here need
  // not sit on the same side of x_i - t as the counting puts them, so they
  // only seed the interpolation.
  const double smallest = x.front() - y.back(), largest = x.back() - y.front();
  const double infinity = std::numeric_limits<double>::infinity();
  std::vector<Bracket> brackets(ranks.size(), Bracket{-infinity, infinity, 0, m * n});
  const double margin = static_cast<double>(m + n) / 4;
  for (int probe = 0; probe < 1000; ++probe) {
    std::size_t widest = ranks.size();
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const Bracket& b = brackets[r];
      if (b.stuck || b.count_hi - b.count_lo <= m + n) continue;
      if (widest == ranks.size() ||
          b.count_hi - b.count_lo > brackets[widest].count_hi - brackets[widest].count_lo)
        widest = r;
    }
    if (widest == ranks.size()) break;
    // The count is close to linear in t over a narrow bracket, so
    // interpolating to just below and then just above the rank closes both
    // ends in a few steps; every third step bisects, which bounds the worst
    // case (clustered or tied differences).
    Bracket& b = brackets[widest];
    double lo = std::isinf(b.lo) ? smallest : b.lo, hi = std::isinf(b.hi) ? largest : b.hi;
    double t = lo + (hi - lo) / 2;
    if (b.steps % 3 != 2) {
      double target = static_cast<double>(ranks[widest]) + (b.steps % 3 == 0 ? -margin : margin);
      double fraction =
          (target - static_cast<double>(b.count_lo)) / static_cast<double>(b.count_hi - b.count_lo);
      t = lo + (hi - lo) * std::clamp(fraction, 0.01, 0.99);
    }
    ++b.steps;
    if (!(t > b.lo && t < b.hi)) {
      b.stuck = true;
      continue;
    }
    std::size_t count = count_at_most(t);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      Bracket& other = brackets[r];
      if (count < ranks[r] && t > other.lo) {
        other.lo = t;
        other.count_lo = count;
      } else if (count >= ranks[r] && t < other.hi) {
        other.hi = t;
        other.count_hi = count;
      }
    }
  }
  std::vector<double> result(ranks.size());
  std::vector<double> window;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Bracket& b = brackets[r];
    // The differences in (lo, hi]: for row i, y_j in [x_i - hi, x_i - lo).
    window.clear();
    window.reserve(b.count_hi - b.count_lo);
    std::size_t first = 0, last = 0;
    for (std::size_t i = 0; i < m; ++i) {
      while (first < n && y[first] < x[i] - b.hi) ++first;
      while (last < n && y[last] < x[i] - b.lo) ++last;
      for (std::size_t j = first; j < last; ++j) window.push_back(x[i] - y[j]);
    }
    auto target = window.begin() + static_cast<std::ptrdiff_t>(ranks[r] - b.count_lo - 1);
    std::nth_element(window.begin(), target, window.end());
    result[r] = *target;
  }
  return result;
}

bool exact_applies(std::size_t m, std::size_t n, bool ties) {
  // R's wilcox.test uses the exact distribution below 50 per side without
  // ties; the same rule here keeps results comparable.
  return !ties && m < 50 && n < 50;
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

double mann_whitney_cdf(std::size_t m, std::size_t n, double u) {
  if (u < 0) return 0;
  const std::vector<double>& pmf = mann_whitney_pmf(m, n);
  double total = 0;
  auto last = std::min(static_cast<std::size_t>(std::floor(u)), pmf.size() - 1);
  for (std::size_t k = 0; k <= last; ++k) total += pmf[k];
  return std::min(total, 1.0);
}

MannWhitney mann_whitney(std::span<const double> x, std::span<const double> y) {
  require_nonempty(x, "mann_whitney x");
  require_nonempty(y, "mann_whitney y");
  std::vector<double> sx = sorted_copy(x), sy = sorted_copy(y);
  return mann_whitney_sorted(sx, sy);
}

MannWhitney mann_whitney_sorted(std::span<const double> x, std::span<const double> y) {
  require_nonempty(x, "mann_whitney x");
  require_nonempty(y, "mann_whitney y");
  const std::size_t m = x.size(), n = y.size();

  // Midranks of the pooled sample by merging the two sorted sides, and the
  // tie correction sum(t^3 - t).
  double rank_sum_x = 0, tie_term = 0;
  bool ties = false;
  std::size_t i = 0, j = 0, rank = 0;
  while (i < m || j < n) {
    double value = j >= n || (i < m && x[i] <= y[j]) ? x[i] : y[j];
    std::size_t from_x = 0, from_y = 0;
    while (i < m && x[i] == value) ++i, ++from_x;
    while (j < n && y[j] == value) ++j, ++from_y;
    auto t = static_cast<double>(from_x + from_y);
    double midrank = static_cast<double>(rank) + (t + 1) / 2;
    rank += from_x + from_y;
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    rank_sum_x += midrank * static_cast<double>(from_x);
  }
  const double dm = static_cast<double>(m), dn = static_cast<double>(n);
  MannWhitney result;
  result.u = rank_sum_x - dm * (dm + 1) / 2;

  if (exact_applies(m, n, ties)) {
    result.exact = true;
    double mean = dm * dn / 2;
    double p = result.u > mean ? 1 - mann_whitney_cdf(m, n, result.u - 1) : mann_whitney_cdf(m, n, result.u);
    result.p_value = std::min(1.0, 2 * p);
    return result;
  }
  double mean = dm * dn / 2;
  double dt = dm + dn;
  double variance = dm * dn / 12 * ((dt + 1) - tie_term / (dt * (dt - 1)));
  if (variance <= 0) {  // every value equal: no evidence either way
    result.p_value = 1;
    return result;
  }
  double diff = result.u - mean;
  double correction = diff > 0 ? 0.5 : (diff < 0 ? -0.5 : 0.0);  // continuity, as R
  result.z = (diff - correction) / std::sqrt(variance);
  result.p_value = std::min(1.0, 2 * normal_cdf(-std::abs(result.z)));
  return result;
}

ShiftEstimate hodges_lehmann_shift(std::span<const double> x, std::span<const double> y, double confidence) {
  require_nonempty(x, "hodges_lehmann x");
  require_nonempty(y, "hodges_lehmann y");
  std::vector<double> sx = sorted_copy(x), sy = sorted_copy(y);
  return hodges_lehmann_shift_sorted(sx, sy, confidence);
}

ShiftEstimate hodges_lehmann_shift_sorted(std::span<const double> sx, std::span<const double> sy,
                                          double confidence) {
  require_nonempty(sx, "hodges_lehmann x");
  require_nonempty(sy, "hodges_lehmann y");
  if (!(confidence > 0 && confidence < 1))
    throw std::invalid_argument("hodges_lehmann: confidence must be in (0, 1)");
  const std::size_t m = sx.size(), n = sy.size(), count = m * n;
  ShiftEstimate result;
  std::size_t half = count / 2;  // 1-based ranks of the middle: (count + 1) / 2, and half + 1 when even

  const double alpha = 1 - confidence;
  bool ties = std::adjacent_find(sx.begin(), sx.end()) != sx.end() ||
              std::adjacent_find(sy.begin(), sy.end()) != sy.end();
  for (std::size_t i = 0, j = 0; !ties && i < m && j < n;) {  // a value in both
    if (sx[i] == sy[j]) ties = true;
    (sx[i] < sy[j] ? i : j)++;
  }
  std::size_t k;  // 1-based rank of the lower bound among the sorted differences
  if (exact_applies(m, n, ties)) {
    const std::vector<double>& pmf = mann_whitney_pmf(m, n);
    double cumulative = 0;
    k = 0;
    while (k < pmf.size() && cumulative + pmf[k] < alpha / 2) cumulative += pmf[k++];
    // k is qwilcox(alpha/2); R bumps 0 to 1.
    if (k == 0) k = 1;
    double below = 0;
    for (std::size_t u = 0; u < k; ++u) below += pmf[u];
    result.confidence = 1 - 2 * below;
  } else {
    double dm = static_cast<double>(m), dn = static_cast<double>(n);
    double sd = std::sqrt(dm * dn * (dm + dn + 1) / 12);
    double c = dm * dn / 2 - normal_quantile(1 - alpha / 2) * sd;
    k = static_cast<std::size_t>(std::max(1.0, std::floor(c)));
    result.confidence = confidence;
  }
  k = std::min(k, count);
  // The estimate is the middle difference (the mean of the two middle ones
  // for an even count); the interval the k-th from each end.
  const std::size_t ranks[] = {k, count % 2 == 1 ? half + 1 : half, half + 1, count - k + 1};
  std::vector<double> d = kth_pairwise_differences(sx, sy, ranks);
  result.estimate = (d[1] + d[2]) / 2;
  result.lower = d[0];
  result.upper = d[3];
  return result;
}

RatioEstimate ratio_of_medians(std::span<const double> x, std::span<const double> y, double confidence) {
  auto logs = [](std::span<const double> samples) {
    std::vector<double> out;
    out.reserve(samples.size());
    for (double s : samples) {
      if (!(s > 0)) throw std::invalid_argument("ratio_of_medians: samples must be > 0");
      out.push_back(std::log(s));
    }
    return out;
  };
  std::vector<double> log_x = logs(x), log_y = logs(y);
  ShiftEstimate shift = hodges_lehmann_shift(log_x, log_y, confidence);
  RatioEstimate result;
  result.ratio = median(x) / median(y);
  result.hl_ratio = std::exp(shift.estimate);
  result.lower = std::exp(shift.lower);
  result.upper = std::exp(shift.upper);
  result.confidence = shift.confidence;
  return result;
}

}  // namespace kw::common
