// Prometheus counters and histograms kept in memory; rendered on /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "model/notifications.hpp"

namespace kw::server {

// A Prometheus label value: backslash, quote and newline escaped.
std::string escape_label(const std::string& value);
// kw_jobs: jobs by state.
std::string job_metrics(const std::map<std::string, std::int64_t>& counts_by_state);
// kw_notifications_pending and each failing notification target's gauges.
std::string notification_metrics(const OutboxHealth& health);

class Metrics {
 public:
  static constexpr std::array<double, 12> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                             0.1,   0.25,   0.5,   1,    2.5,   10};

  void observe_request(const std::string& route, int status, double seconds);

  // Extra gauges computed at scrape time (jobs by state, pool use): each
  // source appends complete metric families in text format.
  void add_source(std::function<void(std::string&)> source);

  std::string render() const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kLatencyBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  std::vector<std::function<void(std::string&)>> sources_;
};

}  // namespace kw::server
