#include "pipeline/nvbench_adapter.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kw/common/subprocess.hpp"
#include "pipeline/adapter_support.hpp"

namespace kw::agent {

using adapter_support::measurement;
using nlohmann::json;

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
  double cold_walltime = 0, batch_walltime = 0;
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
    } else if (tag == "nv/cold/walltime") {
      times.cold_walltime = std::stod(summary_field(summary, "value"));
    } else if (tag == "nv/batch/walltime") {
      times.batch_walltime = std::stod(summary_field(summary, "value"));
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
  double cold_seconds = 0, batch_seconds = 0;
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
    cold_seconds += times.cold_walltime;
    batch_seconds += times.batch_walltime;
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
    if (batch_seconds > 0) {
      result["batch_seconds"] = batch_seconds;
      result["cold_seconds"] = cold_seconds;
    }
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
using adapter_support::bench_child;
using adapter_support::has_any;
using adapter_support::read_json_file;
using adapter_support::remove_quietly;
using adapter_support::temp_file;
using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;

// The sidecar files NVBench writes beside its --jsonbin summary.
void remove_nvbench_outputs(const fs::path& out) {
  remove_quietly(out);
  remove_quietly(out.string() + "-bin");
  remove_quietly(out.string() + "-freqs-bin");
}

// What an NVBench executable answered to its `--list` run behind the
// options kernelwatch passes.
struct NvbenchProbe {
  bool ok = false;
  NvbenchSupport support;
  std::string listing;  // the --list output
  std::string failure, log_tail;
};

// The options asked about, each with what says the bench accepts it.
struct AskedOption {
  std::vector<std::string> argv;
  bool NvbenchSupport::*accepted;
};

// One `--list` run behind the options not yet refused; an option NVBench
// refuses by name is dropped and the run made again, so a bench lacking k of
// them costs k + 1 runs (today's NVBench: one, the listing itself).
NvbenchProbe ask_nvbench(const BenchContext& context) {
  std::vector<AskedOption> asked;
  // An option the bench's own args pass is theirs (NVBench refuses a second
  // --stopping-criterion): it is not asked about.
  for (AskedOption option :
       {AskedOption{{"--no-batch"}, &NvbenchSupport::no_batch},
        AskedOption{{"--stopping-criterion", "stdrel"}, &NvbenchSupport::stopping_criterion},
        AskedOption{{"--profile"}, &NvbenchSupport::profile}}) {
    if (!has_any(context.bench.args, {option.argv.front().c_str()})) asked.push_back(std::move(option));
  }
  NvbenchProbe probe;
  for (;;) {
    ChildSpec spec = bench_child(context, 120);
    for (const AskedOption& option : asked)
      spec.argv.insert(spec.argv.end(), option.argv.begin(), option.argv.end());
    spec.argv.insert(spec.argv.end(), context.bench.args.begin(), context.bench.args.end());
    spec.argv.push_back("--list");
    std::string output;
    spec.on_line = [&output](const std::string& line) { output += line + "\n"; };
    const ChildOutcome outcome = run_child(spec, context.stop);
    if (outcome.ok()) {
      probe.ok = true;
      probe.listing = std::move(output);
      return probe;
    }
    const std::string refused = nvbench_refused_argument(output + "\n" + outcome.output_tail);
    auto option = std::find_if(asked.begin(), asked.end(),
                               [&refused](const AskedOption& o) { return o.argv.front() == refused; });
    if (refused.empty() || option == asked.end()) {
      probe.failure = "--list " + outcome.describe();
      if (!refused.empty())
        probe.failure += ": it does not accept " + refused + ", which the bench's args pass";
      probe.log_tail = outcome.output_tail;
      return probe;
    }
    probe.support.*(option->accepted) = false;
    asked.erase(option);
  }
}

class NvbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "NVBench"; }
  bool runs_without_gpu() const override { return false; }
  // One sample of each state, and none of NVBench's own CUPTI use; before
  // --profile, one sample with its blocking kernel.
  std::vector<std::string> one_pass_args(const BenchContext& context) const override {
    if (probe(context).support.profile) return {"--profile"};
    return {"--run-once"};
  }
  std::vector<std::string> list_args() const override { return {"--list"}; }

  // NVBench names states only as it runs them: the benchmarks are listed,
  // and the first replicate names the states.
  CaseListing list_cases(const BenchContext& context) const override {
    CaseListing listing;
    const NvbenchProbe asked = probe(context);
    if (!asked.ok) {
      listing.failure = asked.failure;
      listing.log_tail = asked.log_tail;
      return listing;
    }
    // A bench whose own arguments select benchmarks runs those as it says.
    if (!has_any(context.bench.args, {"-b", "--benchmark"}))
      listing.groups = nvbench_benchmarks_of_list(asked.listing);
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
    // A bench that did not answer keeps today's options: the pass then says what failed.
    const NvbenchSupport support = probe(context).support;
    for (std::string& arg : nvbench_pass_args(context.bench, context.config.full_bench, benchmarks, support))
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
      for (std::string& note : nvbench_support_notes(support)) pass.notes.push_back(std::move(note));
      if (!support.no_batch && adapted.contains("batch_seconds")) {
        pass.unread_seconds = adapted["batch_seconds"].get<double>();
        pass.unread =
            "went to NVBench's batched measurement, which this NVBench cannot skip and kernelwatch does not "
            "read";
      }
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
  // The executable's answer, asked once per build of it (its size and
  // modification time: an agent runs many jobs in one checkout).
  NvbenchProbe probe(const BenchContext& context) const {
    const fs::path executable = context.checkout / context.bench.path;
    std::error_code ec;
    const auto size = fs::file_size(executable, ec);
    const auto written = fs::last_write_time(executable, ec);
    const std::string build = std::to_string(size) + "@" + std::to_string(written.time_since_epoch().count());
    // Its own args decide what is asked; a new build replaces the old answer.
    // By its real path: an A/B job reaches a checkout through a link of its own.
    std::string key = executable.string();
    if (const fs::path real = fs::weakly_canonical(executable, ec); !ec) key = real.string();
    for (const std::string& arg : context.bench.args) key += "\n" + arg;
    std::lock_guard lock(mutex_);
    if (auto it = probes_.find(key); it != probes_.end() && it->second.first == build)
      return it->second.second;
    NvbenchProbe asked = ask_nvbench(context);
    if (asked.ok) probes_[key] = {build, asked};  // a failure is asked again: it may have been the host's
    return asked;
  }

  mutable std::mutex mutex_;
  // By executable and args: the build asked (size@mtime) and its answer.
  mutable std::map<std::string, std::pair<std::string, NvbenchProbe>> probes_;

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

const BenchAdapter& nvbench_adapter() {
  static const NvbenchAdapter nvbench;
  return nvbench;
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
                                           const std::vector<std::string>& benchmarks,
                                           const NvbenchSupport& support) {
  std::vector<std::string> args;
  // Global (before any -b): each state stops once its mean is known to
  // noise_target, after min_samples and replicate_seconds, or at its
  // timeout; the bench's own settings, after these, win.
  const bool own_criterion = has_any(bench.args, {"--stopping-criterion"});
  if (!own_criterion) {
    if (support.stopping_criterion) args.insert(args.end(), {"--stopping-criterion", "stdrel"});
    args.insert(args.end(), {"--max-noise", std::to_string(fb.noise_target * 100), "--min-time",
                             std::to_string(fb.replicate_seconds)});
  }
  args.insert(args.end(), {"--min-samples", std::to_string(fb.min_samples), "--timeout",
                           std::to_string(std::max(2.0, 8 * fb.replicate_seconds))});
  // Only the cold samples are read: NVBench's batched (hot) measurement after
  // them would take as long again.
  if (support.no_batch && !has_any(bench.args, {"--no-batch"})) args.push_back("--no-batch");
  args.insert(args.end(), bench.args.begin(), bench.args.end());
  for (const std::string& benchmark : benchmarks) args.insert(args.end(), {"-b", benchmark});
  return args;
}

std::string nvbench_refused_argument(const std::string& output) {
  static const std::string kRefused = "Unrecognized command-line argument: `";
  const std::size_t at = output.find(kRefused);
  if (at == std::string::npos) return {};
  const std::size_t start = at + kRefused.size(), end = output.find('`', start);
  return end == std::string::npos ? std::string() : output.substr(start, end - start);
}

std::vector<std::string> nvbench_support_notes(const NvbenchSupport& support) {
  std::vector<std::string> notes;
  if (!support.no_batch)
    notes.emplace_back(
        "this NVBench has no --no-batch (NVBench added it in 2026-02): each state's batched measurement "
        "also runs, after its cold samples");
  if (!support.stopping_criterion)
    notes.emplace_back(
        "this NVBench has no --stopping-criterion (NVBench added it in 2023-11): its one criterion, the same "
        "as stdrel, stops each state by --max-noise and --min-time");
  if (!support.profile)
    notes.emplace_back(
        "this NVBench has no --profile (NVBench added it in 2022-04): the launch pass runs --run-once, "
        "with NVBench's blocking kernel in it");
  return notes;
}

}  // namespace kw::agent
