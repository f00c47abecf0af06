#include "adapters.hpp"

#include <fstream>
#include <map>
#include <stdexcept>

#include "kw/common/stats.hpp"

namespace kw::agent {

namespace {

using nlohmann::json;

double to_ns(double value, const std::string& unit) {
  if (unit == "ns") return value;
  if (unit == "us") return value * 1e3;
  if (unit == "ms") return value * 1e6;
  if (unit == "s") return value * 1e9;
  throw std::runtime_error("unknown Google Benchmark time_unit \"" + unit + "\"");
}

json measurement(std::vector<double> samples) {
  double median = common::median(samples);
  return {{"impl", "candidate"}, {"samples_ns", std::move(samples)}, {"median_ns", median}};
}

}  // namespace

json adapt_gbench(const json& output, const std::string& prefix) {
  if (!output.is_object() || !output.contains("benchmarks") || !output["benchmarks"].is_array()) {
    throw std::runtime_error("Google Benchmark output has no \"benchmarks\" array");
  }
  // Every repetition of a benchmark is one sample; aggregates (mean, median,
  // stddev, cv) are summaries of those and are skipped.
  std::map<std::string, std::vector<double>> samples;
  std::vector<std::string> order;
  for (const json& entry : output["benchmarks"]) {
    if (entry.value("run_type", "iteration") != "iteration") continue;
    std::string name = entry.value("run_name", entry.value("name", ""));
    if (name.empty()) throw std::runtime_error("a Google Benchmark entry has no name");
    if (entry.value("error_occurred", false)) {
      throw std::runtime_error("benchmark " + name +
                               " reported an error: " + entry.value("error_message", ""));
    }
    double time = entry.at("real_time").get<double>();
    if (!(time > 0)) throw std::runtime_error("benchmark " + name + " has a non-positive real_time");
    if (!samples.contains(name)) order.push_back(name);
    samples[name].push_back(to_ns(time, entry.value("time_unit", "ns")));
  }
  json cases = json::array();
  for (const std::string& name : order) {
    cases.push_back({{"name", prefix + name},
                     {"params", {{"harness", "gbench"}}},
                     {"measurements", json::array({measurement(samples[name])})}});
  }
  return {{"cases", cases}};
}

json adapt_nvbench(const json& output, const std::filesystem::path& json_file, const std::string& prefix) {
  if (!output.is_object() || !output.contains("benchmarks") || !output["benchmarks"].is_array()) {
    throw std::runtime_error("NVBench output has no \"benchmarks\" array");
  }
  auto field = [](const json& summary, const std::string& name) -> std::string {
    for (const json& datum : summary.value("data", json::array())) {
      if (datum.value("name", "") == name) return datum.at("value").get<std::string>();
    }
    return {};
  };
  json cases = json::array();
  for (const json& bench : output["benchmarks"]) {
    std::string bench_name = bench.value("name", "");
    for (const json& state : bench.value("states", json::array())) {
      if (state.value("is_skipped", false)) continue;
      std::string state_name = state.value("name", state.value("description", ""));
      json params = {{"harness", "nvbench"}};
      for (const json& axis : state.value("axis_values", json::array())) {
        params[axis.value("name", "?")] = axis.contains("value") && axis["value"].is_string()
                                              ? axis["value"].get<std::string>()
                                              : axis.value("value", json()).dump();
      }
      std::vector<double> samples;
      std::string mean_text;
      for (const json& summary : state.value("summaries", json::array())) {
        std::string tag = summary.value("tag", "");
        if (tag == "nv/json/bin:nv/cold/sample_times") {
          std::filesystem::path file = field(summary, "filename");
          if (file.is_relative()) file = json_file.parent_path() / file;
          std::size_t count = std::stoull(field(summary, "size"));
          std::ifstream in(file, std::ios::binary);
          if (!in) throw std::runtime_error("NVBench sample file " + file.string() + " is missing");
          std::vector<float> seconds(count);
          if (!in.read(reinterpret_cast<char*>(seconds.data()),
                       static_cast<std::streamsize>(count * sizeof(float)))) {
            throw std::runtime_error("NVBench sample file " + file.string() + " holds fewer than " +
                                     std::to_string(count) + " samples");
          }
          for (float s : seconds) samples.push_back(static_cast<double>(s) * 1e9);
        } else if (tag == "nv/cold/time/gpu/mean") {
          mean_text = field(summary, "value");
        }
      }
      if (samples.empty() && !mean_text.empty()) samples.push_back(std::stod(mean_text) * 1e9);
      if (samples.empty()) continue;
      cases.push_back({{"name", prefix + bench_name + "/" + state_name},
                       {"params", params},
                       {"measurements", json::array({measurement(std::move(samples))})}});
    }
  }
  return {{"cases", cases}};
}

}  // namespace kw::agent
