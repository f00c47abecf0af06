#include "pipeline/bench_runs.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
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

// One kwbench invocation's command, and the files it writes (its JSON
// document) and reads (a shard's cases), removed with it.
struct KwbenchCall {
  KwbenchCall() = default;
  KwbenchCall(const KwbenchCall&) = delete;
  KwbenchCall& operator=(const KwbenchCall&) = delete;
  ~KwbenchCall() {
    std::error_code ec;
    fs::remove(out, ec);
    if (!case_list.empty()) fs::remove(case_list, ec);
  }
  json document() const {  // null when it wrote none (or none whole)
    std::ifstream in(out);
    if (!in) return json();
    try {
      return json::parse(in);
    } catch (const std::exception&) {
      return json();
    }
  }
  ChildSpec spec;
  fs::path out, case_list;
};

// `stage` is a stage's name or "preflight".
std::unique_ptr<KwbenchCall> kwbench_call(const BenchConfig& bench, const std::string& stage,
                                          double timeout_s, const PipelineOptions& options,
                                          const std::vector<std::string>& extra_args = {},
                                          std::map<std::string, std::string> env = {}) {
  auto call = std::make_unique<KwbenchCall>();
  call->out = temp_json(stage);
  ChildSpec& spec = call->spec;
  spec.argv = bench_command(bench, options.checkout);
  spec.argv.insert(spec.argv.end(), {"--stage", stage, "--json", call->out.string(), "--case", bench.cases});
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
  if (auto shard = options.shard_cases.find(bench.name); shard != options.shard_cases.end()) {
    call->case_list = temp_json(stage + "-cases");
    std::ofstream names(call->case_list);
    for (const std::string& name : shard->second) names << name << '\n';
    spec.argv.insert(spec.argv.end(), {"--case-list", call->case_list.string()});
  }
  spec.cwd = options.checkout;
  spec.timeout_s = timeout_s;
  spec.env = std::move(env);
  spec.env.merge(bench_env(bench));
  if (!options.reference_cache_dir.empty() && std::getenv("KWBENCH_REFERENCE_CACHE") == nullptr)
    spec.env["KWBENCH_REFERENCE_CACHE"] = options.reference_cache_dir.string();
  return call;
}

// One kwbench invocation run to its end; its JSON document (null when it
// wrote none) in `document`.
ChildOutcome invoke_kwbench(const BenchConfig& bench, const std::string& stage, double timeout_s,
                            const PipelineOptions& options, json& document,
                            const std::vector<std::string>& extra_args = {},
                            std::function<void(const std::string&)> on_line = {},
                            std::map<std::string, std::string> env = {}) {
  const std::unique_ptr<KwbenchCall> call =
      kwbench_call(bench, stage, timeout_s, options, extra_args, std::move(env));
  call->spec.on_line = std::move(on_line);
  ChildOutcome outcome = run_child(call->spec, *options.stop);
  document = call->document();
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

namespace {

// What the agent checks of a python bench's stage beyond its own word: after
// load, the kernel images of the shared objects it imported and that they
// are this build's; after launch_geometry, each case's launches between its
// marks, and the fingerprints.
void check_python_stage(BenchResult& result, StageName stage, const BenchConfig& bench,
                        const RepoConfig& config, const PipelineOptions& options,
                        const InjectRecords* records) {
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
  if (stage == StageName::launch_geometry && records != nullptr && result.status != "skipped") {
    const InjectedLaunches observed = records->read();
    check_marked_launches(result, bench, observed);
    attach_fingerprints(result, observed, fingerprint_context(bench, options));
  }
}

}  // namespace

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
  check_python_stage(result, stage, bench, config, options, records ? &*records : nullptr);
  return result;
}

struct PythonPreflight::Process {
  Process(const BenchConfig& b, const RepoConfig& c, PipelineOptions o)
      : bench(b), config(c), options(std::move(o)) {}
  const BenchConfig& bench;
  const RepoConfig& config;
  PipelineOptions options;
  InjectRecords records{true};
  std::unique_ptr<KwbenchCall> call;
  fs::path go;        // where it waits for quick_bench's cases; empty: it does not wait
  fs::path start_go;  // where it waits, imported, to start; empty: it starts at once
  std::atomic<bool> dismissed{false};
  std::future<ChildOutcome> running;
  std::optional<ChildOutcome> outcome;  // once it ended
  std::chrono::steady_clock::time_point started;
  std::size_t entries_read = 0;
  std::map<StageName, BenchResult> results;
  StageName last = StageName::load;  // the last stage it wrote
  std::optional<CaseListing> listing;
  std::array<std::int64_t, 4> written{};  // the document's inode, size and time when last read
};

std::unique_ptr<PythonPreflight> PythonPreflight::start(const BenchConfig& bench, const RepoConfig& config,
                                                        const PipelineOptions& options, Plan plan) {
  const int case_stages = plan.case_stages;
  const bool quick_bench_waits = plan.quick_bench_waits;
  if (!find_inject_library()) return nullptr;  // its launch_geometry fails as a stage of its own says
  std::unique_ptr<PythonPreflight> preflight(new PythonPreflight());
  preflight->process_ = std::make_unique<Process>(bench, config, options);
  Process& p = *preflight->process_;
  // Each per-case stage's timeout the harness keeps; this bounds the rest
  // (the import, and the wait for quick_bench's cases while the base's
  // fingerprints are taken).
  double timeout_s = 60;
  std::vector<std::string> args = {"--preflight-stages", std::to_string(case_stages)};
  for (StageName stage : common::preflight_stages()) {
    timeout_s += config.timeout_for(stage) * (quick_bench_waits ? 2 : 1);
    if (stage == StageName::load) continue;
    args.insert(args.end(), {"--stage-timeout", std::string(common::to_string(stage)) + "=" +
                                                    std::to_string(config.timeout_for(stage))});
  }
  for (const std::string& module : bench.modules) args.insert(args.end(), {"--module", module});
  if (quick_bench_waits) {
    p.go = temp_json("quick-bench-go");
    fs::remove(p.go);
    args.insert(args.end(), {"--quick-bench-go", p.go.string()});
  }
  if (plan.starts_on_go) {
    p.start_go = temp_json("preflight-go");
    fs::remove(p.start_go);
    args.insert(args.end(), {"--go-file", p.start_go.string()});
  }
  std::map<std::string, std::string> env = p.records.env;
  env["LD_BIND_NOW"] = "1";  // for load; the stages after it are as they were in a process of their own
  p.call = kwbench_call(bench, "preflight", timeout_s, options, args, std::move(env));
  fs::remove(p.call->out);  // its presence says a stage ended
  p.call->spec.stop_grace_s = 1;
  p.started = std::chrono::steady_clock::now();
  p.running = std::async(std::launch::async, [&p] { return run_child(p.call->spec, p.dismissed); });
  return preflight;
}

PythonPreflight::~PythonPreflight() {
  if (!process_) return;
  process_->dismissed = true;  // what it would still do, nobody reads
  if (process_->running.valid()) process_->running.wait();
  std::error_code ec;
  if (!process_->go.empty()) fs::remove(process_->go, ec);
  if (!process_->start_go.empty()) fs::remove(process_->start_go, ec);
}

void PythonPreflight::read_stages() {
  Process& p = *process_;
  // Parsed again only once rewritten: a thousand cases' stages are
  // megabytes. Each rewrite is a new file renamed into place, so a new inode.
  struct stat file {};
  if (::stat(p.call->out.c_str(), &file) != 0) return;
  const std::array<std::int64_t, 4> written = {static_cast<std::int64_t>(file.st_ino), file.st_size,
                                               file.st_mtim.tv_sec, file.st_mtim.tv_nsec};
  if (written == p.written) return;
  p.written = written;
  const json document = p.call->document();
  if (!document.is_object()) return;
  if (!p.listing && document.contains("listing") && document["listing"].is_array()) {
    CaseListing listing;
    for (const json& c : document["listing"])
      listing.cases.push_back(
          {c.value("name", ""), !c.value("baselines", json::array()).empty(), c.value("timed", true)});
    listing.ok = true;
    p.listing = std::move(listing);
  }
  const json& entries = document.value("preflight", json::array());
  const double since_start =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - p.started).count();
  for (; p.entries_read < entries.size(); ++p.entries_read) {
    const json& entry = entries[p.entries_read];
    const json& stage_json = entry.value("stage", json::object());
    const auto name = common::stage_name_from(stage_json.value("name", std::string()));
    if (!name) continue;
    ChildOutcome so_far;
    so_far.exit_code = 0;
    BenchResult result = stage_result(p.bench, stage_json, entry.value("cases", json::array()),
                                      document.value("device", json()), p.outcome ? *p.outcome : so_far);
    result.seconds = stage_json.value("duration_ms", 0.0) / 1000;
    // The interpreter's start and its imports count to the first stage.
    if (*name == StageName::load) result.seconds = std::max(result.seconds, since_start);
    check_python_stage(result, *name, p.bench, p.config, p.options, &p.records);
    p.results[*name] = std::move(result);
    p.last = *name;
  }
}

BenchResult PythonPreflight::result(StageName stage) {
  Process& p = *process_;
  while (!p.results.contains(stage) && !p.outcome) {
    const bool ended = p.running.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready;
    if (p.options.stop->load()) p.dismissed = true;
    if (ended) p.outcome = p.running.get();
    read_stages();
  }
  if (auto found = p.results.find(stage); found != p.results.end()) {
    BenchResult result = found->second;
    // A failed stage ends the process: its output says more than the stage's line.
    if (result.status == "failed" && result.log_tail.empty()) {
      if (!p.outcome && p.running.wait_for(std::chrono::seconds(10)) == std::future_status::ready)
        p.outcome = p.running.get();
      if (p.outcome) result.log_tail = p.outcome->output_tail;
    }
    return result;
  }
  BenchResult result;
  if (!p.results.empty() && p.results.at(p.last).status != "passed") {
    result.status = "skipped";
    result.message = p.bench.name + ": not run, its " + std::string(common::to_string(p.last)) + " stage " +
                     p.results.at(p.last).status;
    return result;
  }
  if (p.outcome->ok()) {  // it was told to stop before this stage
    result.status = "skipped";
    result.message = p.bench.name + ": not run";
    return result;
  }
  // It died in this stage (a crash, its timeout, the job's stop): the
  // process's own outcome says how.
  result = stage_result(p.bench, json(), json(), json(), *p.outcome);
  result.message += " (in its " + std::string(common::to_string(stage)) + " stage, kwbench.py's preflight)";
  return result;
}

std::optional<CaseListing> PythonPreflight::listing() {
  if (!process_->listing) result(StageName::load);
  return process_->listing;
}

void PythonPreflight::time_cases(const std::vector<std::string>& cases) {
  write_go(process_->go, cases.empty() ? json{{"exit", true}} : json{{"argv", cases}});
}

void PythonPreflight::time_every_case() {
  write_go(process_->go, json{{"every_case", true}});
}

void PythonPreflight::go() {
  write_go(process_->start_go, json{{"argv", json::array()}});
}

BenchResult PythonPreflight::launch_pass() {
  go();
  BenchResult load = result(StageName::load);
  if (load.status != "passed") return load;
  return result(StageName::launch_geometry);
}

void PythonPreflight::write_go(const fs::path& file, const json& go) {
  if (file.empty()) return;
  const fs::path partial = file.string() + ".partial";
  {
    std::ofstream out(partial);
    out << go.dump();
    if (!out.flush()) throw std::runtime_error("cannot write " + partial.string());
  }
  fs::rename(partial, file);  // whole or not at all: it reads the file the moment it appears
}

bool PythonPreflight::waits_for_cases() const {
  return !process_->go.empty();
}

BenchResult python_launch_pass(const BenchConfig& bench, const RepoConfig& config,
                               const PipelineOptions& options) {
  // Started as a pull request's head's preflight is (its load's imports
  // and bound symbols included), so that both sides' fingerprints mean the same.
  std::unique_ptr<PythonPreflight> pass = PythonPreflight::start(bench, config, options, {.case_stages = 1});
  if (!pass) return run_python(bench, StageName::launch_geometry, config, options);
  return pass->launch_pass();
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
