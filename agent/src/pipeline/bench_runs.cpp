#include "pipeline/bench_runs.hpp"

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include "host/gpu_info.hpp"
#include "host/process.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/sha256.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/adapters.hpp"
#include "pipeline/bench_checks.hpp"
#include "pipeline/fingerprint.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/measurement_engine.hpp"
#include "pipeline/prepared_passes.hpp"
#include "pipeline/python_harness.hpp"
#include "pipeline/stale_outputs.hpp"
#include "project/built_commits.hpp"
#include "project/git.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;
using common::StageName;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// One kwbench invocation: `stage` is a stage's name or "preflight"; its
// JSON document (null when it wrote none) in `document`.
ChildOutcome invoke_kwbench(const BenchConfig& bench, const std::string& stage, double timeout_s,
                            const PipelineOptions& options, json& document,
                            const std::vector<std::string>& extra_args = {},
                            std::function<void(const std::string&)> on_line = {},
                            std::map<std::string, std::string> env = {}) {
  fs::path out = temp_json(stage);
  ChildSpec spec;
  spec.argv = bench_command(bench, options.checkout);
  spec.argv.insert(spec.argv.end(), {"--stage", stage, "--json", out.string(), "--case", bench.cases});
  if (stage == "load" || stage == "preflight") {
    for (const LibraryCheck& library : bench.libraries) {
      spec.argv.push_back("--library");
      spec.argv.push_back((options.checkout / library.path).string());
      for (const std::string& symbol : library.symbols) {
        spec.argv.push_back("--symbol");
        spec.argv.push_back(symbol);
      }
    }
  }
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  spec.argv.insert(spec.argv.end(), extra_args.begin(), extra_args.end());
  // A shard's cases alone; the list replaces the bench's glob.
  fs::path case_list;
  if (auto shard = options.shard_cases.find(bench.name); shard != options.shard_cases.end()) {
    case_list = temp_json(stage + "-cases");
    std::ofstream names(case_list);
    for (const std::string& name : shard->second) names << name << '\n';
    spec.argv.insert(spec.argv.end(), {"--case-list", case_list.string()});
  }
  spec.cwd = options.checkout;
  spec.timeout_s = timeout_s;
  spec.on_line = std::move(on_line);
  spec.env = std::move(env);
  spec.env.merge(bench_env(bench));
  if (!options.reference_cache_dir.empty() && std::getenv("KWBENCH_REFERENCE_CACHE") == nullptr)
    spec.env["KWBENCH_REFERENCE_CACHE"] = options.reference_cache_dir.string();
  ChildOutcome outcome = run_child(spec, *options.stop);
  document = json();
  if (std::ifstream in(out); in) {
    try {
      in >> document;
    } catch (const std::exception&) {
      document = json();
    }
  }
  fs::remove(out);
  if (!case_list.empty()) fs::remove(case_list);
  return outcome;
}

// The bench's result of one stage from its stage object (null: it wrote none).
BenchResult stage_result(const BenchConfig& bench, const json& stage_json, const json& cases,
                         const json& device, const ChildOutcome& outcome) {
  BenchResult result;
  result.seconds = outcome.seconds;
  if (!stage_json.is_object()) {
    result.status = "failed";
    result.message = bench.name + ": " + outcome.describe() +
                     (outcome.timed_out || outcome.stopped ? "" : " without writing its result");
    if (const std::string why = outcome.error_line(); !why.empty()) result.message += ": " + why;
    result.log_tail = outcome.output_tail;
    return result;
  }
  result.status = stage_json.value("status", "failed");
  result.message = bench.name + ": " + stage_json.value("message", "");
  result.log_tail = stage_json.value("log_tail", std::string());
  if (result.status == "failed" && result.log_tail.empty()) result.log_tail = outcome.output_tail;
  result.details = stage_json.value("details", json::object());
  result.device = device;
  result.cases = cases.is_array() ? cases : json::array();
  return result;
}

// The result of one stage's process from its document ({"stage", "cases",
// "device"}; null or cut short: the process's own outcome says why).
BenchResult document_result(const BenchConfig& bench, const json& document, const ChildOutcome& outcome) {
  if (!document.is_object() || !document.contains("stage") || outcome.timed_out || outcome.stopped)
    return stage_result(bench, json(), json(), json(), outcome);
  return stage_result(bench, document["stage"], document.value("cases", json::array()),
                      document.value("device", json()), outcome);
}

// A directory for libkw_inject.so's records of one launch pass, removed with
// it; no library: no records, and the cases get no fingerprint.
struct InjectRecords {
  explicit InjectRecords(bool launches) {
    const std::optional<fs::path> library = find_inject_library();
    if (!library) return;
    dir = temp_json("launches");
    fs::remove(dir);
    fs::create_directories(dir);
    env = {{"CUDA_INJECTION64_PATH", library->string()}, {"KW_INJECT_OUT", dir.string()}};
    // kwbench traces its own launches with CUPTI's activity API.
    if (!launches) env["KW_INJECT_LAUNCHES"] = "0";
  }
  ~InjectRecords() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
  InjectRecords(const InjectRecords&) = delete;
  InjectRecords& operator=(const InjectRecords&) = delete;
  InjectedLaunches read() const { return dir.empty() ? InjectedLaunches{} : read_injected_launches(dir); }
  fs::path dir;
  std::map<std::string, std::string> env;
};

FingerprintContext fingerprint_context(const BenchConfig& bench, const PipelineOptions& options) {
  FingerprintContext context;
  context.checkout = options.checkout;
  context.harness = adapter_for(bench.format).harness();
  context.bench_args = bench.args;
  return context;
}

// A kwbench launch pass's fingerprints, from its modules (the records) and
// its own per-case launches.
void fingerprint_kwbench(BenchResult& result, const InjectRecords& records, const BenchConfig& bench,
                         const PipelineOptions& options) {
  if (records.dir.empty() || result.status == "skipped") return;
  InjectedLaunches observed = records.read();
  observed.launches.clear();  // kwbench's own word on them is per case
  attach_fingerprints(result, observed, fingerprint_context(bench, options));
}

}  // namespace

BenchResult run_kwbench(const BenchConfig& bench, StageName stage, const RepoConfig& config,
                        const PipelineOptions& options) {
  json document;
  std::optional<InjectRecords> records;  // a launch pass's alone
  if (stage == StageName::launch_geometry) records.emplace(false);
  ChildOutcome outcome =
      invoke_kwbench(bench, std::string(common::to_string(stage)), config.timeout_for(stage), options,
                     document, {}, {}, records ? records->env : std::map<std::string, std::string>{});
  BenchResult result = document_result(bench, document, outcome);
  if (records) fingerprint_kwbench(result, *records, bench, options);
  return result;
}

// A stage of a python bench (kernels/python/kwbench.py speaks kwbench's
// command line): load imports its modules with every symbol bound
// (LD_BIND_NOW), then the kernel images of the shared objects it names as
// its own (the repository's, and those its imports loaded from outside the
// interpreter's and the system's trees) are checked; launch_geometry runs each case once with
// libkw_inject.so in the process and holds the launches between the case's
// marks to what the case declares.
// A python bench's extension modules from the checkout, as its load stage
// imported them: each this build's output.
std::vector<std::string> stale_extensions(const json& shared_objects, const RepoConfig& config,
                                          const PipelineOptions& options) {
  std::vector<std::string> problems;
  if (!options.build_started) return problems;
  const fs::path root = fs::weakly_canonical(options.checkout);
  for (const json& object : shared_objects) {
    const fs::path file = object.get<std::string>();
    const auto relative = file.lexically_relative(root);
    if (relative.empty() || *relative.begin() == "..") continue;  // torch's, the toolkit's
    if (auto stale =
            stale_output_problem(file, options.checkout, *options.build_started, config.build_commands))
      problems.push_back("`" + relative.generic_string() + "`: " + *stale);
  }
  return problems;
}

BenchResult run_python(const BenchConfig& bench, StageName stage, const RepoConfig& config,
                       const PipelineOptions& options) {
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  std::optional<InjectRecords> records;  // a launch pass's alone
  if (stage == StageName::launch_geometry) records.emplace(true);
  if (stage == StageName::load) {
    env["LD_BIND_NOW"] = "1";
    for (const std::string& module : bench.modules) args.insert(args.end(), {"--module", module});
  } else if (stage == StageName::launch_geometry) {
    if (records->dir.empty()) {
      BenchResult result;
      result.status = "failed";
      result.message = bench.name +
                       ": libkw_inject.so not found (beside kw, in ../lib, or KW_INJECT_LIBRARY), so its "
                       "launches cannot be checked";
      return result;
    }
    env = records->env;
  }
  json document;
  ChildOutcome outcome =
      invoke_kwbench(bench, std::string(common::to_string(stage)), config.timeout_for(stage), options,
                     document, args, {}, std::move(env));
  BenchResult result = document_result(bench, document, outcome);
  if (stage == StageName::load && result.status == "passed") {
    std::vector<fs::path> files;
    const json shared_objects = result.details.value("shared_objects", json::array());
    for (const json& file : shared_objects) files.emplace_back(file.get<std::string>());
    const ImageCheck images = check_kernel_images(files, options);
    if (auto stale = stale_extensions(shared_objects, config, options); !stale.empty()) {
      result.status = "failed";
      result.message = problems_message(bench.name, stale);
    } else if (!images.problems.empty()) {
      result.status = "failed";
      result.message = problems_message(bench.name, images.problems);
    } else {
      result.message += "; " + images.note;
    }
  }
  if (records && result.status != "skipped") {
    const InjectedLaunches observed = records->read();
    check_marked_launches(result, bench, observed);
    attach_fingerprints(result, observed, fingerprint_context(bench, options));
  }
  return result;
}

// load, launch_geometry, correctness and quick_bench of a kwbench bench in
// one invocation: each case set up once for its three per-case stages. The
// stages it did not reach (an earlier one failed) are absent. nullopt: the
// bench predates --stage preflight (its harness is older), so each stage
// runs on its own.
// `on_started(stage)`: the bench began a per-case stage (its line
// "[kwbench] stage NAME started"). `without_quick_bench`: it stops after
// correctness (a pull request times only the cases whose code changed, and
// which those are is known from the launch pass's fingerprints).
std::optional<std::map<StageName, BenchResult>> run_kwbench_preflight(
    const BenchConfig& bench, const RepoConfig& config, const PipelineOptions& options,
    const std::function<void(StageName)>& on_started, bool without_quick_bench) {
  // Each per-case stage's timeout the harness keeps; this bounds the rest.
  double timeout_s = 60;
  // The stages a kwbench bench's preflight runs in one invocation.
  const std::vector<StageName> preflight = common::preflight_stages();
  for (StageName stage : preflight) timeout_s += config.timeout_for(stage);
  std::vector<std::string> stage_timeouts;
  for (StageName stage : preflight) {
    if (stage == StageName::load) continue;
    stage_timeouts.push_back("--stage-timeout");
    stage_timeouts.push_back(std::string(common::to_string(stage)) + "=" +
                             std::to_string(config.timeout_for(stage)));
  }
  // launch_geometry and correctness, of the three per-case stages.
  if (without_quick_bench) stage_timeouts.insert(stage_timeouts.end(), {"--preflight-stages", "2"});
  json document;
  static const std::regex started_line(R"(\[kwbench\] stage (\w+) started)");
  const InjectRecords records(false);
  ChildOutcome outcome = invoke_kwbench(
      bench, "preflight", timeout_s, options, document, stage_timeouts,
      [&](const std::string& line) {
        std::smatch m;
        if (!std::regex_search(line, m, started_line)) return;
        if (auto stage = common::stage_name_from(m[1].str())) on_started(*stage);
      },
      records.env);
  std::map<StageName, BenchResult> results;
  if (!document.is_object() && outcome.exit_code == 2 &&
      outcome.output_tail.find("preflight") != std::string::npos)
    return std::nullopt;
  if (!document.is_object() || !document.contains("preflight") || outcome.timed_out || outcome.stopped) {
    results[StageName::load] = stage_result(bench, json(), json(), json(), outcome);
    return results;
  }
  for (const json& entry : document["preflight"]) {
    const json& stage_json = entry.value("stage", json::object());
    auto name = common::stage_name_from(stage_json.value("name", std::string()));
    if (!name) continue;
    BenchResult result = stage_result(bench, stage_json, entry.value("cases", json::array()),
                                      document.value("device", json()), outcome);
    result.seconds = stage_json.value("duration_ms", 0.0) / 1000;
    if (*name == StageName::launch_geometry) fingerprint_kwbench(result, records, bench, options);
    results[*name] = std::move(result);
  }
  if (results.empty()) results[StageName::load] = stage_result(bench, json(), json(), json(), outcome);
  return results;
}

}  // namespace kw::agent
