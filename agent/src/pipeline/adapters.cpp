#include "pipeline/adapters.hpp"

#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kw/common/stats.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/prepared_passes.hpp"
#include "pipeline/python_harness.hpp"

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

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Which of a repetition's times is its sample: the manual time (CUDA events)
// of a UseManualTime benchmark and the real time of a UseRealTime one, as
// they ask; else the CPU time, by which Google Benchmark itself sizes the
// iterations, and which a busy shared host moves far less than wall time.
std::string gbench_clock(const std::string& name, const json& entry) {
  if (ends_with(name, "/manual_time")) return "manual";
  if (ends_with(name, "/real_time") || !entry.contains("cpu_time")) return "real";
  return "cpu";
}

json measurement(std::vector<double> samples) {
  double median = common::median(samples);
  return {{"impl", "candidate"}, {"samples_ns", std::move(samples)}, {"median_ns", median}};
}

// A CPU or wall time is judged by its fastest repetition: on a shared host
// the neighbours only ever add to it (docs/detection.md). Manual times are
// GPU events, judged as kwbench's are.
json gbench_measurement(std::vector<double> samples, const std::string& clock) {
  json m = measurement(std::move(samples));
  if (clock != "manual") m["replicate_location"] = "minimum";
  return m;
}

}  // namespace

json adapt_gbench(const json& output, const std::string& prefix) {
  if (!output.is_object() || !output.contains("benchmarks") || !output["benchmarks"].is_array()) {
    throw std::runtime_error("Google Benchmark output has no \"benchmarks\" array");
  }
  // Every repetition of a benchmark is one sample; aggregates (mean, median,
  // stddev, cv) are summaries of those and are skipped.
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, std::string> clocks;
  std::vector<std::string> order;
  for (const json& entry : output["benchmarks"]) {
    if (entry.value("run_type", "iteration") != "iteration") continue;
    std::string name = entry.value("run_name", entry.value("name", ""));
    if (name.empty()) throw std::runtime_error("a Google Benchmark entry has no name");
    if (entry.value("error_occurred", false)) {
      throw std::runtime_error("benchmark " + name +
                               " reported an error: " + entry.value("error_message", ""));
    }
    const std::string clock = gbench_clock(name, entry);
    const double time = entry.at(clock == "cpu" ? "cpu_time" : "real_time").get<double>();
    if (!(time > 0)) throw std::runtime_error("benchmark " + name + " has a non-positive " + clock + " time");
    if (!samples.contains(name)) order.push_back(name);
    samples[name].push_back(to_ns(time, entry.value("time_unit", "ns")));
    clocks[name] = clock;
  }
  json cases = json::array();
  for (const std::string& name : order) {
    cases.push_back({{"name", prefix + name},
                     {"params", {{"harness", "gbench"}, {"clock", clocks[name]}}},
                     {"measurements", json::array({gbench_measurement(samples[name], clocks[name])})}});
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

// What one NVBench state's summaries say of its times: the per-sample
// sidecar files (times and SM clocks) where it wrote them, else its mean.
struct StateTimes {
  std::optional<std::vector<double>> seconds, hertz;
  std::string mean_text, sidecar_tag;
  bool cpu_only = false;
};

StateTimes state_times(const json& state, const std::filesystem::path& json_file) {
  StateTimes times;
  for (const json& summary : state.value("summaries", json::array())) {
    const std::string tag = summary.value("tag", "");
    if (tag == "nv/json/bin:nv/cold/sample_times" || tag == "nv/json/bin:nv/cpu_only/sample_times") {
      times.sidecar_tag = tag;
      times.seconds = read_sidecar(json_file, summary);
    } else if (tag == "nv/json/freqs-bin:nv/cold/sample_freqs") {
      times.hertz = read_sidecar(json_file, summary);
    } else if (tag == "nv/cold/time/gpu/mean") {
      times.mean_text = summary_field(summary, "value");
    } else if (tag == "nv/cpu_only/time/cpu/mean") {
      times.mean_text = summary_field(summary, "value");
      times.cpu_only = true;
    }
  }
  return times;
}

}  // namespace

namespace {

// NVBench's output as a report's cases, a state at a time.
struct NvbenchCases {
  NvbenchCases(const std::filesystem::path& file, const std::string& name_prefix)
      : json_file(file), prefix(name_prefix) {}

  const std::filesystem::path& json_file;
  const std::string& prefix;
  std::map<int, json> devices;
  json cases = json::array();
  json notes = json::array();
  json report_device;
  std::set<int> used_devices;
  int skipped = 0;
  std::vector<std::string> skipped_names;  // the first few, as NVBench names them

  void skip(const std::string& bench_name, const json& state) {
    if (++skipped > 5) return;
    std::string what = bench_name + " [" + state.value("name", std::string()) + "]";
    if (const std::string why = state.value("skip_reason", std::string()); !why.empty())
      what += " (" + why + ")";
    skipped_names.push_back(std::move(what));
  }

  // The state's samples in ns: each one where the output has them, else NVBench's mean alone.
  std::vector<double> samples_of(const StateTimes& times, const std::string& name) {
    std::vector<double> samples;
    if (times.seconds && !times.seconds->empty()) {
      for (double s : *times.seconds) samples.push_back(s * 1e9);
    } else if (!times.mean_text.empty()) {
      samples.push_back(std::stod(times.mean_text) * 1e9);
      notes.push_back(name + ": " +
                      (times.sidecar_tag.empty() ? std::string("no per-sample times in the output")
                                                 : "its sample file could not be read") +
                      "; one sample, NVBench's mean");
    }
    return samples;
  }

  void add(const std::string& bench_name, const json& state) {
    // Clean names: the benchmark, then each axis as /Name=Value (the
    // state's own name starts with "Device=N " and holds spaces).
    std::string name = prefix + bench_name;
    json params = {{"harness", "nvbench"}};
    for (const json& axis : state.value("axis_values", json::array())) {
      const std::string axis_name = axis.value("name", "?");
      name += "/" + axis_name + "=" + axis.value("value", "");
      params[axis_name] = axis_value(axis);
    }
    const StateTimes times = state_times(state, json_file);
    if (times.cpu_only) params["cpu_only"] = true;
    const std::vector<double> samples = samples_of(times, name);
    if (samples.empty()) {
      notes.push_back(name + ": no time in the output; left out");
      return;
    }
    json measured = measurement(samples);
    // Each sample's SM clock, for the clock-aware comparison.
    if (times.hertz && times.hertz->size() == samples.size() && times.seconds) {
      json mhz = json::array();
      for (double hz : *times.hertz) mhz.push_back(hz / 1e6);
      measured["sm_mhz"] = mhz;
    }
    // A cpu_only state's "device" is left uninitialised by NVBench
    // (1766531128 on the H100): only a GPU of the devices section counts.
    if (!times.cpu_only && state.contains("device") && state["device"].is_number_integer() &&
        devices.contains(state["device"].get<int>())) {
      const int id = state["device"].get<int>();
      used_devices.insert(id);
      if (report_device.is_null()) report_device = nvbench_device(devices[id]);
      if (devices.size() > 1) params["device"] = id;
    }
    cases.push_back({{"name", name}, {"params", params}, {"measurements", json::array({measured})}});
  }

  json adapted() {
    // A CPU-only benchmark names no device; the host's GPU is still the run's.
    if (report_device.is_null() && !devices.empty()) report_device = nvbench_device(devices.begin()->second);
    if (used_devices.size() > 1) {
      notes.push_back("states ran on " + std::to_string(used_devices.size()) +
                      " GPUs; the report names the first, each case its own in params.device");
    }
    if (skipped > 0) {
      std::string note = std::to_string(skipped) + " state(s) skipped by the benchmark itself: ";
      for (std::size_t i = 0; i < skipped_names.size(); ++i) note += (i == 0 ? "" : ", ") + skipped_names[i];
      if (skipped > static_cast<int>(skipped_names.size())) note += ", ...";
      notes.push_back(note);
    }
    json result = {{"cases", cases}, {"notes", notes}};
    if (!report_device.is_null()) result["device"] = report_device;
    return result;
  }
};

}  // namespace

json adapt_nvbench(const json& output, const std::filesystem::path& json_file, const std::string& prefix) {
  if (!output.is_object() || !output.contains("benchmarks") || !output["benchmarks"].is_array()) {
    throw std::runtime_error("NVBench output has no \"benchmarks\" array");
  }
  NvbenchCases adapting{json_file, prefix};
  for (const json& device : output.value("devices", json::array()))
    adapting.devices[device.at("id").get<int>()] = device;
  for (const json& bench : output["benchmarks"]) {
    const std::string bench_name = bench.value("name", "");
    for (const json& state : bench.value("states", json::array())) {
      if (state.value("is_skipped", false))
        adapting.skip(bench_name, state);
      else
        adapting.add(bench_name, state);
    }
  }
  return adapting.adapted();
}

namespace {

namespace fs = std::filesystem;
using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;

// An empty file /tmp/kw-pass-XXXXXX-<tag> for a child to write.
fs::path temp_file(const std::string& tag) {
  char pattern[] = "/tmp/kw-pass-XXXXXX";
  const int fd = mkstemp(pattern);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  fs::path path = std::string(pattern) + "-" + tag;
  fs::rename(pattern, path);
  return path;
}

json read_json_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return json();
  return json::parse(in, nullptr, false);
}

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

ChildSpec bench_child(const BenchContext& context, double timeout_s) {
  ChildSpec spec;
  spec.argv = bench_command(context.bench, context.checkout);
  spec.env = bench_env(context.bench);
  spec.cwd = context.checkout;
  spec.timeout_s = timeout_s;
  return spec;
}

// kwbench and python benches: `--list` names the cases, a `--stage
// full_bench` run over a case list is one replicate.
class KwbenchAdapter final : public BenchAdapter {
 public:
  explicit KwbenchAdapter(std::string harness) : harness_(std::move(harness)) {}
  std::string harness() const override { return harness_; }
  bool speaks_kwbench() const override { return true; }
  bool runs_without_gpu() const override { return false; }

  CaseListing list_cases(const BenchContext& context) const override {
    CaseListing listing;
    const fs::path out = temp_file("list.json");
    ChildSpec spec = bench_child(context, 120);
    // Its own arguments, as every stage and pass gets them: they may choose the cases.
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    spec.argv.insert(spec.argv.end(), {"--list", "--case", context.bench.cases, "--json", out.string()});
    const ChildOutcome outcome = run_child(spec, context.stop);
    const json listed = read_json_file(out);
    remove_quietly(out);
    if (!outcome.ok() || !listed.is_object() || !listed.contains("cases")) {
      listing.failure = "--list " + outcome.describe();
      listing.log_tail = outcome.output_tail;
      return listing;
    }
    for (const json& c : listed["cases"])
      listing.cases.push_back(
          {c["name"], !c.value("baselines", json::array()).empty(), c.value("timed", true)});
    listing.ok = true;
    return listing;
  }

  PassOutput measure(const BenchContext& context, const PassRequest& request) const override {
    PassOutput pass;
    const fs::path list = temp_file("cases.txt"), out = temp_file("pass.json");
    {
      std::ofstream file(list);
      for (const std::string& name : request.cases) file << name << "\n";
    }
    const FullBenchConfig& fb = context.config.full_bench;
    std::vector<std::string> pass_arguments = {
        "--json",         out.string(),
        "--case-list",    list.string(),
        "--order-seed",   std::to_string(request.order_seed),
        "--max-seconds",  std::to_string(fb.replicate_seconds),
        "--min-samples",  std::to_string(fb.min_samples),
        "--max-samples",  std::to_string(fb.max_samples),
        "--noise-target", std::to_string(fb.noise_target),
        "--impls",        request.baselines ? "baseline:*" : "candidate"};
    // Only when asked for: a bench built on an older harness knows no such option.
    if (fb.energy_seconds > 0 && !request.baselines) {
      pass_arguments.push_back("--energy-seconds");
      pass_arguments.push_back(std::to_string(fb.energy_seconds));
    }
    const ChildOutcome outcome = run_pass(context, pass_spec(context), pass_arguments);
    pass.seconds = outcome.seconds;
    pass.log_tail = outcome.output_tail;
    const json document = read_json_file(out);
    remove_quietly(out);
    remove_quietly(list);
    if (!document.is_object() || !document.contains("stage")) {
      pass.failure = outcome.describe() + " without writing its result";
      if (const std::string why = outcome.error_line(); !why.empty()) pass.failure += ": " + why;
      return pass;
    }
    pass.ok = true;
    pass.device = document.value("device", json());
    const json& stage = document["stage"];
    pass.result_seconds = stage.value("duration_ms", 0.0) / 1000;
    for (const json& c : stage["details"].value("cases", json::array())) {
      const json& d = c.value("details", json::object());
      pass.setup_seconds += d.value("setup_seconds", 0.0);
      pass.measure_seconds += d.value("measure_seconds", 0.0);
    }
    if (stage.value("status", "") == "failed") {
      pass.failure = stage.value("message", "");
      pass.log_tail = stage.value("log_tail", std::string());
    }
    pass.cases = document.value("cases", json::array());
    return pass;
  }

  void prepare_passes(const BenchContext& context) const override {
    if (preparable(context)) context.prepared->top_up(context.checkout.string(), pass_spec(context));
  }

 private:
  static bool preparable(const BenchContext& context) {
    return context.prepared != nullptr && context.bench.format == BenchFormat::python;
  }

  // A full_bench pass's command without the pass's own arguments.
  static ChildSpec pass_spec(const BenchContext& context) {
    ChildSpec spec = bench_child(context, context.config.timeout_for(common::StageName::full_bench));
    spec.argv.insert(spec.argv.end(), {"--stage", "full_bench"});
    // The bench's own arguments first: the replicate settings after them win.
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    if (preparable(context) && context.config.full_bench.prepare_context)
      spec.argv.emplace_back("--context-before-go");
    return spec;
  }

  // A python bench's pass runs in a process prepared during an earlier pass
  // where one waits (prepared_passes.hpp).
  static ChildOutcome run_pass(const BenchContext& context, ChildSpec spec,
                               const std::vector<std::string>& pass_arguments) {
    if (preparable(context)) return context.prepared->run(context.checkout.string(), spec, pass_arguments);
    spec.argv.insert(spec.argv.end(), pass_arguments.begin(), pass_arguments.end());
    return run_child(spec, context.stop);
  }

  std::string harness_;
};

class GbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "Google Benchmark"; }
  bool runs_without_gpu() const override { return true; }
  std::string unobserved() const override {
    return "per-sample clocks and throttling (Google Benchmark records neither)";
  }
  std::vector<std::string> one_pass_args() const override {
    return {"--benchmark_min_time=0.01", "--benchmark_repetitions=1"};
  }
  std::vector<std::string> list_args() const override { return {"--benchmark_list_tests=true"}; }

  // Each line of --benchmark_list_tests is a benchmark's name as its results
  // carry it (the bench's own arguments apply: its filter narrows them).
  CaseListing list_cases(const BenchContext& context) const override {
    CaseListing listing;
    ChildSpec spec = bench_child(context, 120);
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    spec.argv.push_back("--benchmark_list_tests=true");
    std::vector<std::string> names;
    spec.on_line = [&names](const std::string& line) {
      if (!line.empty()) names.push_back(line);
    };
    const ChildOutcome outcome = run_child(spec, context.stop);
    if (!outcome.ok()) {
      listing.failure = "--benchmark_list_tests " + outcome.describe();
      listing.log_tail = outcome.output_tail;
      return listing;
    }
    for (const std::string& name : names) listing.cases.push_back({context.bench.name + "/" + name, false});
    listing.ok = true;
    return listing;
  }

  // One process: kernelwatch's repetitions and time per repetition (the
  // bench's own arguments after them win), the cases by an exact filter, and
  // the repetitions of all of them interleaved at random where the library
  // can.
  PassOutput measure(const BenchContext& context, const PassRequest& request) const override {
    PassOutput pass;
    if (request.baselines) return pass;  // a Google Benchmark case has no baseline implementations
    const FullBenchConfig& fb = context.config.full_bench;
    const fs::path out = temp_file("gbench.json");
    ChildSpec spec = bench_child(context, context.config.timeout_for(common::StageName::full_bench));
    const int repetitions = std::max(2, fb.min_samples);
    spec.argv.push_back("--benchmark_repetitions=" + std::to_string(repetitions));
    spec.argv.push_back("--benchmark_min_time=" + std::to_string(fb.replicate_seconds / repetitions));
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    spec.argv.insert(
        spec.argv.end(),
        {"--benchmark_format=json", "--benchmark_out=" + out.string(), "--benchmark_out_format=json",
         "--benchmark_report_aggregates_only=false", "--benchmark_display_aggregates_only=true"});
    const std::string prefix = context.bench.name + "/";
    if (!request.cases.empty()) {
      std::vector<std::string> names;
      for (const std::string& name : request.cases) names.push_back(name.substr(prefix.size()));
      spec.argv.push_back("--benchmark_filter=" + gbench_filter(names));
    }
    if (interleaves(context)) spec.argv.push_back("--benchmark_enable_random_interleaving=true");
    const ChildOutcome outcome = run_child(spec, context.stop);
    pass.seconds = outcome.seconds;
    pass.log_tail = outcome.output_tail;
    const json document = read_json_file(out);
    remove_quietly(out);
    if (!outcome.ok() || !document.is_object()) {
      pass.failure = outcome.describe() + (document.is_object() ? "" : " without writing its result");
      if (const std::string why = outcome.error_line(); !why.empty()) pass.failure += ": " + why;
      return pass;
    }
    try {
      pass.cases = adapt_gbench(document, prefix)["cases"];
      pass.ok = true;
    } catch (const std::exception& error) {
      pass.failure = std::string("cannot read its output: ") + error.what();
    }
    return pass;
  }

 private:
  // Whether the library has --benchmark_enable_random_interleaving (1.6 and
  // later), asked once per executable.
  bool interleaves(const BenchContext& context) const {
    const std::string executable = (context.checkout / context.bench.path).string();
    std::lock_guard lock(mutex_);
    auto [it, fresh] = interleaving_.try_emplace(executable, false);
    if (fresh) {
      ChildSpec spec = bench_child(context, 60);
      spec.argv.insert(spec.argv.end(),
                       {"--benchmark_list_tests=true", "--benchmark_enable_random_interleaving=true"});
      it->second = run_child(spec, context.stop).ok();
    }
    return it->second;
  }

  mutable std::mutex mutex_;
  mutable std::map<std::string, bool> interleaving_;
};

// The sidecar files NVBench writes beside its --jsonbin summary.
void remove_nvbench_outputs(const fs::path& out) {
  remove_quietly(out);
  remove_quietly(out.string() + "-bin");
  remove_quietly(out.string() + "-freqs-bin");
}

bool has_any(const std::vector<std::string>& args, std::initializer_list<const char*> flags) {
  return std::any_of(args.begin(), args.end(), [&flags](const std::string& arg) {
    return std::any_of(flags.begin(), flags.end(), [&arg](const char* flag) { return arg == flag; });
  });
}

class NvbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "NVBench"; }
  bool runs_without_gpu() const override { return false; }
  // One sample of each state, and none of NVBench's own CUPTI use.
  std::vector<std::string> one_pass_args() const override { return {"--profile"}; }
  std::vector<std::string> list_args() const override { return {"--list"}; }

  // NVBench names states only as it runs them: the benchmarks are listed,
  // and the first replicate names the states.
  CaseListing list_cases(const BenchContext& context) const override {
    CaseListing listing;
    ChildSpec spec = bench_child(context, 120);
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    spec.argv.push_back("--list");
    std::string output;
    spec.on_line = [&output](const std::string& line) { output += line + "\n"; };
    const ChildOutcome outcome = run_child(spec, context.stop);
    if (!outcome.ok()) {
      listing.failure = "--list " + outcome.describe();
      listing.log_tail = outcome.output_tail;
      return listing;
    }
    // A bench whose own arguments select benchmarks runs those as it says.
    if (!has_any(context.bench.args, {"-b", "--benchmark"}))
      listing.groups = nvbench_benchmarks_of_list(output);
    listing.cases_from_first_pass = true;
    listing.ok = true;
    return listing;
  }

  PassOutput measure(const BenchContext& context, const PassRequest& request) const override {
    PassOutput pass;
    if (request.baselines) return pass;  // an NVBench state has no baseline implementations
    const fs::path out = temp_file("nvbench.json");
    ChildSpec spec = bench_child(context, context.config.timeout_for(common::StageName::full_bench));
    std::vector<std::string> benchmarks = request.groups;
    if (!request.cases.empty())
      benchmarks = benchmarks_of(context.bench.name + "/", request.cases, request.groups);
    for (std::string& arg : nvbench_pass_args(context.bench, context.config.full_bench, benchmarks))
      spec.argv.push_back(std::move(arg));
    spec.argv.insert(spec.argv.end(), {"--jsonbin", out.string()});
    // NVBench logs the state it runs ("Run:  [i/n] name [axes]"), then any
    // sample it discarded because the GPU throttled ("Warn: GPU throttled").
    std::string running;
    std::map<std::string, int> throttled;
    spec.on_line = [&running, &throttled](const std::string& line) {
      if (line.rfind("Run:", 0) == 0) {
        const std::size_t close = line.find("] ");
        running = close == std::string::npos ? line.substr(4) : line.substr(close + 2);
      } else if (line.find("GPU throttled below threshold") != std::string::npos) {
        ++throttled[running];
      }
    };
    const ChildOutcome outcome = run_child(spec, context.stop);
    pass.seconds = outcome.seconds;
    pass.log_tail = outcome.output_tail;
    const json document = read_json_file(out);
    if (!outcome.ok() || !document.is_object()) {
      pass.failure = outcome.describe() + (document.is_object() ? "" : " without writing its result");
      if (const std::string why = outcome.error_line(); !why.empty()) pass.failure += ": " + why;
      remove_nvbench_outputs(out);
      return pass;
    }
    try {
      json adapted = adapt_nvbench(document, out, context.bench.name + "/");
      pass.cases = std::move(adapted["cases"]);
      pass.device = adapted.value("device", json());
      for (const json& note : adapted.value("notes", json::array())) pass.notes.push_back(note);
      pass.ok = true;
    } catch (const std::exception& error) {
      pass.failure = std::string("cannot read its output: ") + error.what();
    }
    remove_nvbench_outputs(out);
    for (const auto& [state, samples] : throttled)
      pass.notes.push_back(state + ": NVBench discarded " + std::to_string(samples) +
                           " sample(s) taken while the GPU throttled");
    return pass;
  }

 private:
  // The benchmarks that run `cases`: the longest listed name each case
  // starts with, in the order of `groups`.
  static std::vector<std::string> benchmarks_of(const std::string& prefix,
                                                const std::vector<std::string>& cases,
                                                const std::vector<std::string>& groups) {
    std::set<std::string> needed;
    for (const std::string& name : cases) {
      std::string best;
      for (const std::string& group : groups) {
        const std::string stem = prefix + group;
        const bool starts =
            name.rfind(stem, 0) == 0 && (name.size() == stem.size() || name[stem.size()] == '/');
        if (starts && group.size() > best.size()) best = group;
      }
      if (!best.empty()) needed.insert(best);
    }
    std::vector<std::string> ordered;
    for (const std::string& group : groups) {
      if (needed.contains(group)) ordered.push_back(group);
    }
    return ordered;
  }
};

}  // namespace

std::string regex_literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string gbench_filter(const std::vector<std::string>& names) {
  std::string filter = "^(";
  for (std::size_t i = 0; i < names.size(); ++i) filter += (i == 0 ? "" : "|") + regex_literal(names[i]);
  return filter + ")$";
}

std::vector<std::string> nvbench_benchmarks_of_list(const std::string& listing) {
  // "## [0] `name` (N configurations)" under "# Benchmarks" (the devices
  // before it are listed alike).
  std::vector<std::string> names;
  std::istringstream lines(listing);
  bool benchmarks = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ", 0) == 0) benchmarks = line == "# Benchmarks";
    if (!benchmarks || line.rfind("## [", 0) != 0) continue;
    const std::size_t open = line.find('`'), close = line.rfind('`');
    if (open != std::string::npos && close > open) names.push_back(line.substr(open + 1, close - open - 1));
  }
  return names;
}

std::vector<std::string> nvbench_pass_args(const BenchConfig& bench, const FullBenchConfig& fb,
                                           const std::vector<std::string>& benchmarks) {
  std::vector<std::string> args;
  // Global (before any -b): each state stops once its mean is known to
  // noise_target, after min_samples and replicate_seconds, or at its
  // timeout; the bench's own settings, after these, win.
  const bool own_criterion = has_any(bench.args, {"--stopping-criterion"});
  if (!own_criterion) {
    args.insert(args.end(),
                {"--stopping-criterion", "stdrel", "--max-noise", std::to_string(fb.noise_target * 100),
                 "--min-time", std::to_string(fb.replicate_seconds)});
  }
  args.insert(args.end(), {"--min-samples", std::to_string(fb.min_samples), "--timeout",
                           std::to_string(std::max(2.0, 8 * fb.replicate_seconds))});
  // Only the cold samples are read: NVBench's batched (hot) measurement after
  // them would take as long again.
  if (!has_any(bench.args, {"--no-batch"})) args.push_back("--no-batch");
  args.insert(args.end(), bench.args.begin(), bench.args.end());
  for (const std::string& benchmark : benchmarks) args.insert(args.end(), {"-b", benchmark});
  return args;
}

const BenchAdapter& adapter_for(BenchFormat format) {
  static const KwbenchAdapter kwbench("kwbench");
  static const KwbenchAdapter python("kwbench.py");
  static const GbenchAdapter gbench;
  static const NvbenchAdapter nvbench;
  switch (format) {
    case BenchFormat::gbench:
      return gbench;
    case BenchFormat::nvbench:
      return nvbench;
    case BenchFormat::python:
      return python;
    case BenchFormat::kwbench:
      break;
  }
  return kwbench;
}

}  // namespace kw::agent
