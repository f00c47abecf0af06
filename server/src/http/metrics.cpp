#include "http/metrics.hpp"

#include <sstream>

namespace kw::server {

namespace {

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

}  // namespace

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

}  // namespace kw::server
