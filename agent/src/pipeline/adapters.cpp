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
#include "pipeline/adapter_support.hpp"
#include "pipeline/bench_checks.hpp"
#include "pipeline/bench_runs.hpp"
#include "pipeline/nvbench_adapter.hpp"
#include "pipeline/prepared_passes.hpp"
#include "pipeline/python_harness.hpp"

namespace kw::agent {

BenchResult BenchAdapter::run_stage(common::StageName stage, const BenchConfig& bench,
                                    const RepoConfig& config, const PipelineOptions& options) const {
  if (stage == common::StageName::load) return run_adapted_load(*this, bench, config, options);
  if (stage == common::StageName::launch_geometry)
    return run_injected_launches(*this, bench, config, options);
  if (stage == common::StageName::correctness) return run_check_command(bench, options);
  BenchResult result;
  result.status = "skipped";
  result.message =
      bench.name + ": a " + harness() + " bench has no " + std::string(common::to_string(stage)) + " stage";
  return result;
}

BenchResult BenchAdapter::launch_pass(const BenchConfig& bench, const RepoConfig& config,
                                      const PipelineOptions& options) const {
  return run_injected_launches(*this, bench, config, options, true);
}

namespace adapter_support {

namespace fs = std::filesystem;
using common::ChildSpec;
using nlohmann::json;

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

json measurement(std::vector<double> samples) {
  double median = common::median(samples);
  return {{"impl", "candidate"}, {"samples_ns", std::move(samples)}, {"median_ns", median}};
}

bool has_any(const std::vector<std::string>& args, std::initializer_list<const char*> flags) {
  return std::any_of(args.begin(), args.end(), [&flags](const std::string& arg) {
    return std::any_of(flags.begin(), flags.end(), [&arg](const char* flag) { return arg == flag; });
  });
}

}  // namespace adapter_support

namespace {

using adapter_support::measurement;
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

namespace fs = std::filesystem;
using adapter_support::bench_child;
using adapter_support::read_json_file;
using adapter_support::remove_quietly;
using adapter_support::temp_file;
using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;

// full_bench` run over a case list is one replicate.
class KwbenchAdapter final : public BenchAdapter {
 public:
  KwbenchAdapter(std::string harness, bool python) : harness_(std::move(harness)), python_(python) {}
  std::string harness() const override { return harness_; }
  bool speaks_kwbench() const override { return true; }
  bool runs_without_gpu() const override { return false; }

  // Each stage through the bench's own command line (`--stage S`); a python
  // bench's launch pass as every python launch pass runs, so that the
  // fingerprints of any two mean the same (python_launch_pass).
  BenchResult run_stage(common::StageName stage, const BenchConfig& bench, const RepoConfig& config,
                        const PipelineOptions& options) const override {
    if (!python_) return run_kwbench(bench, stage, config, options);
    if (stage == common::StageName::launch_geometry) return python_launch_pass(bench, config, options);
    return run_python(bench, stage, config, options);
  }
  BenchResult launch_pass(const BenchConfig& bench, const RepoConfig& config,
                          const PipelineOptions& options) const override {
    return run_stage(common::StageName::launch_geometry, bench, config, options);
  }

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
  bool python_;  // kwbench.py in the bench's interpreter, else a C++ kwbench executable
};

class GbenchAdapter final : public BenchAdapter {
 public:
  std::string harness() const override { return "Google Benchmark"; }
  bool runs_without_gpu() const override { return true; }
  std::string unobserved() const override {
    return "per-sample clocks and throttling (Google Benchmark records neither)";
  }
  std::vector<std::string> one_pass_args(const BenchContext& /*context*/) const override {
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

const BenchAdapter& adapter_for(BenchFormat format) {
  static const KwbenchAdapter kwbench("kwbench", false);
  static const KwbenchAdapter python("kwbench.py", true);
  static const GbenchAdapter gbench;
  switch (format) {
    case BenchFormat::gbench:
      return gbench;
    case BenchFormat::nvbench:
      return nvbench_adapter();
    case BenchFormat::python:
      return python;
    case BenchFormat::kwbench:
      break;
  }
  return kwbench;
}

}  // namespace kw::agent
