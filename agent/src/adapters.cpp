#include "adapters.hpp"

#include <fstream>
#include <map>
#include <optional>
#include <set>
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

namespace {

// NVBench's summaries hold their values as strings in a "data" list.
std::string summary_field(const json& summary, const std::string& name) {
  for (const json& datum : summary.value("data", json::array())) {
    if (datum.value("name", "") == name) return datum.at("value").get<std::string>();
  }
  return {};
}

// The report's device from NVBench's `devices` entry.
json nvbench_device(const json& device) {
  const int sm = device.at("sm_version").get<int>();
  return {{"name", device.at("name")},
          {"kind", "gpu"},
          {"compute_capability", std::to_string(sm / 100) + "." + std::to_string(sm % 100 / 10)},
          {"memory_bytes", device.at("global_memory_size")},
          {"sm_count", device.at("number_of_sms")},
          {"l2_bytes", device.at("l2_cache_size")}};
}

// `count` float32 values from an NVBench sidecar; nullopt when the file is
// missing or short (NVBench writes the summary even when a sidecar failed).
std::optional<std::vector<double>> read_sidecar(const std::filesystem::path& json_file, const json& summary) {
  std::filesystem::path file = summary_field(summary, "filename");
  if (file.is_relative()) file = json_file.parent_path() / file;
  std::string size = summary_field(summary, "size");
  if (size.empty()) return std::nullopt;
  const std::size_t count = std::stoull(size);
  std::vector<float> values(count);
  std::ifstream in(file, std::ios::binary);
  if (!in ||
      !in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float))))
    return std::nullopt;
  return std::vector<double>(values.begin(), values.end());
}

json axis_value(const json& axis) {
  const std::string type = axis.value("type", "string");
  const std::string text = axis.value("value", "");
  try {
    if (type == "int64") return std::stoll(text);
    if (type == "float64") return std::stod(text);
  } catch (const std::exception&) {  // kept as NVBench wrote it
  }
  return text;
}

}  // namespace

json adapt_nvbench(const json& output, const std::filesystem::path& json_file, const std::string& prefix) {
  if (!output.is_object() || !output.contains("benchmarks") || !output["benchmarks"].is_array()) {
    throw std::runtime_error("NVBench output has no \"benchmarks\" array");
  }
  std::map<int, json> devices;
  for (const json& device : output.value("devices", json::array()))
    devices[device.at("id").get<int>()] = device;

  json cases = json::array();
  json notes = json::array();
  json report_device;
  std::set<int> used_devices;
  int skipped = 0;
  for (const json& bench : output["benchmarks"]) {
    const std::string bench_name = bench.value("name", "");
    for (const json& state : bench.value("states", json::array())) {
      if (state.value("is_skipped", false)) {
        ++skipped;
        continue;
      }
      // Clean names: the benchmark, then each axis as /Name=Value (the
      // state's own name starts with "Device=N " and holds spaces).
      std::string name = prefix + bench_name;
      json params = {{"harness", "nvbench"}};
      for (const json& axis : state.value("axis_values", json::array())) {
        const std::string axis_name = axis.value("name", "?");
        name += "/" + axis_name + "=" + axis.value("value", "");
        params[axis_name] = axis_value(axis);
      }
      std::optional<std::vector<double>> seconds, hertz;
      std::string mean_text, sidecar_tag;
      bool cpu_only = false;
      for (const json& summary : state.value("summaries", json::array())) {
        const std::string tag = summary.value("tag", "");
        if (tag == "nv/json/bin:nv/cold/sample_times" || tag == "nv/json/bin:nv/cpu_only/sample_times") {
          sidecar_tag = tag;
          seconds = read_sidecar(json_file, summary);
        } else if (tag == "nv/json/freqs-bin:nv/cold/sample_freqs") {
          hertz = read_sidecar(json_file, summary);
        } else if (tag == "nv/cold/time/gpu/mean") {
          mean_text = summary_field(summary, "value");
        } else if (tag == "nv/cpu_only/time/cpu/mean") {
          mean_text = summary_field(summary, "value");
          cpu_only = true;
        }
      }
      if (cpu_only) params["cpu_only"] = true;
      std::vector<double> samples;
      if (seconds && !seconds->empty()) {
        for (double s : *seconds) samples.push_back(s * 1e9);
      } else if (!mean_text.empty()) {
        samples.push_back(std::stod(mean_text) * 1e9);
        notes.push_back(name + ": " +
                        (sidecar_tag.empty() ? std::string("no per-sample times in the output")
                                             : "its sample file could not be read") +
                        "; one sample, NVBench's mean");
      }
      if (samples.empty()) {
        notes.push_back(name + ": no time in the output; left out");
        continue;
      }
      json measured = measurement(samples);
      // Each sample's SM clock, for the clock-aware comparison.
      if (hertz && hertz->size() == samples.size() && seconds) {
        json mhz = json::array();
        for (double hz : *hertz) mhz.push_back(hz / 1e6);
        measured["sm_mhz"] = mhz;
      }
      // A cpu_only state's "device" is left uninitialised by NVBench
      // (1766531128 on the H100): only a GPU of the devices section counts.
      if (!cpu_only && state.contains("device") && state["device"].is_number_integer() &&
          devices.contains(state["device"].get<int>())) {
        const int id = state["device"].get<int>();
        used_devices.insert(id);
        if (report_device.is_null()) report_device = nvbench_device(devices[id]);
        if (devices.size() > 1) params["device"] = id;
      }
      cases.push_back({{"name", name}, {"params", params}, {"measurements", json::array({measured})}});
    }
  }
  // A CPU-only benchmark names no device; the host's GPU is still the run's.
  if (report_device.is_null() && !devices.empty()) report_device = nvbench_device(devices.begin()->second);
  if (used_devices.size() > 1) {
    notes.push_back("states ran on " + std::to_string(used_devices.size()) +
                    " GPUs; the report names the first, each case its own in params.device");
  }
  if (skipped > 0) notes.push_back(std::to_string(skipped) + " state(s) skipped by the benchmark itself");
  json adapted = {{"cases", cases}, {"notes", notes}};
  if (!report_device.is_null()) adapted["device"] = report_device;
  return adapted;
}

void BenchAdapter::remove_outputs(const std::filesystem::path& out) const {
  std::error_code ec;
  std::filesystem::remove(out, ec);
}

namespace {

class GbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "Google Benchmark"; }
  std::vector<std::string> output_args(const std::filesystem::path& out) const override {
    return {"--benchmark_format=json", "--benchmark_out=" + out.string(), "--benchmark_out_format=json"};
  }
  json adapt(const json& document, const std::filesystem::path&, const std::string& prefix) const override {
    return adapt_gbench(document, prefix);
  }
  bool runs_without_gpu() const override { return true; }
  std::vector<std::string> one_pass_args() const override {
    return {"--benchmark_min_time=0.01", "--benchmark_repetitions=1"};
  }
  std::vector<std::string> list_args() const override { return {"--benchmark_list_tests=true"}; }
};

class NvbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "NVBench"; }
  // --jsonbin: the summary plus per-sample times and clocks in sidecars.
  std::vector<std::string> output_args(const std::filesystem::path& out) const override {
    return {"--jsonbin", out.string()};
  }
  json adapt(const json& document, const std::filesystem::path& out,
             const std::string& prefix) const override {
    return adapt_nvbench(document, out, prefix);
  }
  bool runs_without_gpu() const override { return false; }
  // One sample of each state, and none of NVBench's own CUPTI use.
  std::vector<std::string> one_pass_args() const override { return {"--profile"}; }
  std::vector<std::string> list_args() const override { return {"--list"}; }
  void remove_outputs(const std::filesystem::path& out) const override {
    BenchAdapter::remove_outputs(out);
    std::error_code ec;
    std::filesystem::remove_all(out.string() + "-bin", ec);
    std::filesystem::remove_all(out.string() + "-freqs-bin", ec);
  }
};

}  // namespace

const BenchAdapter* adapter_for(BenchFormat format) {
  static const GbenchAdapter gbench;
  static const NvbenchAdapter nvbench;
  switch (format) {
    case BenchFormat::gbench:
      return &gbench;
    case BenchFormat::nvbench:
      return &nvbench;
    case BenchFormat::kwbench:
    case BenchFormat::python:  // kernels/python/kwbench.py speaks kwbench's command line
      return nullptr;
  }
  return nullptr;
}

}  // namespace kw::agent
