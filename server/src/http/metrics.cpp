#include "http/metrics.hpp"

#include <sstream>

namespace kw::server {

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Metrics::observe_request(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
  Histogram& histogram = latency_[route];
  for (std::size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (seconds <= kLatencyBuckets[i]) ++histogram.buckets[i];
  }
  ++histogram.count;
  histogram.sum += seconds;
}

void Metrics::add_source(std::function<void(std::string&)> source) {
  std::lock_guard lock(mutex_);
  sources_.push_back(std::move(source));
}

std::string Metrics::render() const {
  std::ostringstream out;
  std::vector<std::function<void(std::string&)>> sources;
  {
    std::lock_guard lock(mutex_);
    out << "# HELP kw_http_requests_total HTTP requests by route and status.\n"
        << "# TYPE kw_http_requests_total counter\n";
    for (const auto& [key, count] : requests_) {
      out << "kw_http_requests_total{route=\"" << escape_label(key.first) << "\",status=\"" << key.second
          << "\"} " << count << "\n";
    }
    out << "# HELP kw_http_request_duration_seconds Time from request read to response ready.\n"
        << "# TYPE kw_http_request_duration_seconds histogram\n";
    for (const auto& [route, histogram] : latency_) {
      std::string label = escape_label(route);
      for (std::size_t i = 0; i < kLatencyBuckets.size(); ++i) {
        out << "kw_http_request_duration_seconds_bucket{route=\"" << label << "\",le=\"" << kLatencyBuckets[i]
            << "\"} " << histogram.buckets[i] << "\n";
      }
      out << "kw_http_request_duration_seconds_bucket{route=\"" << label << "\",le=\"+Inf\"} "
          << histogram.count << "\n"
          << "kw_http_request_duration_seconds_sum{route=\"" << label << "\"} " << histogram.sum << "\n"
          << "kw_http_request_duration_seconds_count{route=\"" << label << "\"} " << histogram.count << "\n";
    }
    sources = sources_;
  }
  std::string text = out.str();
  for (const auto& source : sources) source(text);
  return text;
}

std::string job_metrics(const std::map<std::string, std::int64_t>& counts_by_state) {
  std::string text = "# HELP kw_jobs Jobs by state.\n# TYPE kw_jobs gauge\n";
  for (const auto& [state, count] : counts_by_state)
    text += "kw_jobs{state=\"" + escape_label(state) + "\"} " + std::to_string(count) + "\n";
  return text;
}

std::string notification_metrics(const OutboxHealth& health) {
  std::string text =
      "# HELP kw_notifications_pending Notifications not yet delivered nor given up on.\n"
      "# TYPE kw_notifications_pending gauge\n"
      "kw_notifications_pending " +
      std::to_string(health.pending) +
      "\n# HELP kw_notification_target_failures Failed attempts in a row per target (0 rows: all healthy).\n"
      "# TYPE kw_notification_target_failures gauge\n";
  for (const TargetHealth& target : health.failing)
    text += "kw_notification_target_failures{target=\"" + escape_label(target.target) + "\"} " +
            std::to_string(target.consecutive_failures) + "\n";
  text +=
      "# HELP kw_notification_target_paused 1 while a target that kept failing is paused.\n"
      "# TYPE kw_notification_target_paused gauge\n";
  for (const TargetHealth& target : health.failing)
    text += "kw_notification_target_paused{target=\"" + escape_label(target.target) + "\"} " +
            (target.paused ? "1" : "0") + "\n";
  return text;
}

}  // namespace kw::server
