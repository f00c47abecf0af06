#include "pipeline/pipeline.hpp"

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
#include "pipeline/bench_runs.hpp"
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

namespace {

using common::StageName;
using nlohmann::json;
namespace fs = std::filesystem;

std::string tail_of(const std::string& text, std::size_t bytes = 8000) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f s", seconds);
  return buffer;
}

// ptxas -v prints, per kernel, "Compiling entry function 'NAME'" then
// "Used N registers, ... S bytes smem ..." and "X bytes spill stores, Y bytes spill loads".
json ptxas_report(const std::string& log) {
  json kernels = json::array();
  std::regex entry(R"(Compiling entry function '([^']+)')");
  std::regex used(R"(Used (\d+) registers(?:.*?(\d+) bytes smem)?)");
  std::regex spill(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::istringstream lines(log);
  std::string line;
  json current;
  while (std::getline(lines, line)) {
    if (line.rfind("$ ", 0) == 0) continue;  // the command line itself, as echoed into the log
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      if (!current.is_null()) kernels.push_back(current);
      current = {{"name", m[1].str()},
                 {"registers", 0},
                 {"shared_bytes", 0},
                 {"spill_stores", 0},
                 {"spill_loads", 0}};
    } else if (!current.is_null() && std::regex_search(line, m, spill)) {
      current["spill_stores"] = std::stoll(m[1]);
      current["spill_loads"] = std::stoll(m[2]);
    } else if (!current.is_null() && std::regex_search(line, m, used)) {
      current["registers"] = std::stoll(m[1]);
      if (m[2].matched) current["shared_bytes"] = std::stoll(m[2]);
    }
  }
  if (!current.is_null()) kernels.push_back(current);
  return kernels;
}

// A stage's cost: its wall time, and the time its bench processes held the
// GPU (0 for build, which uses none).
common::Stage make_stage(StageName name, const std::string& status, double wall_seconds, double gpu_seconds,
                         const std::string& message, const std::string& log_tail = {},
                         json details = json::object()) {
  common::Stage stage;
  stage.name = name;
  stage.status = common::stage_status_from(status).value_or(common::StageStatus::failed);
  stage.duration_ms = static_cast<std::int64_t>(wall_seconds * 1000);
  stage.gpu_seconds = gpu_seconds;
  stage.message = message;
  stage.log_tail = tail_of(log_tail);
  stage.details = std::move(details);
  return stage;
}

// What every report of a run says of itself: the commit, the agent, when;
// its end is now.
common::RunReport report_head(const std::string& project, const PipelineOptions& options,
                              const std::string& started_at) {
  common::RunReport report;
  report.project = project;
  report.commit = options.commit;
  report.branch = options.branch;
  report.base_commit = options.base_commit;
  report.job_id = options.job_id;
  if (options.shard && options.shard->count > 1) report.shard = options.shard;
  report.git = commit_info(options.checkout, options.commit);
  report.agent = {options.agent_name, KW_VERSION, options.agent_host};
  report.started_at = started_at;
  report.finished_at = utc_now_rfc3339();
  return report;
}

double seconds_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

struct Logger {
  const PipelineOptions& options;
  void operator()(const std::string& line) const {
    if (options.log) options.log(line);
  }
  void started(StageName stage) const {
    if (options.on_stage) options.on_stage({{"started", common::to_string(stage)}});
  }
  void ended(const common::Stage& stage) const {
    if (options.on_stage) options.on_stage(common::to_json(stage));
  }
};

// One side's launch pass for its fingerprints alone.
FingerprintSet launch_pass_fingerprints(const BenchConfig& bench, const RepoConfig& config,
                                        const PipelineOptions& options) {
  return fingerprints_of(adapter_for(bench.format).launch_pass(bench, config, options));
}

// What a commit's fingerprints depend on besides its code: the bench's
// configuration, the GPU, its driver and runtime, and this kw.
std::string fingerprint_key(const std::string& commit, const BenchConfig& bench,
                            const PipelineOptions& options) {
  const json device = host_gpu_device();
  const json identity{{"commit", commit},
                      {"bench",
                       {bench.name, bench.path, static_cast<int>(bench.format), bench.args, bench.cases,
                        bench.launch_args, bench.interpreter}},
                      {"gpu", device.is_object() ? device.value("name", "") : ""},
                      {"driver", device.is_object() ? device.value("driver", "") : ""},
                      {"cuda_runtime", device.is_object() ? device.value("cuda_runtime", "") : ""},
                      {"kw", KW_VERSION}};
  json keyed = identity;
  // A shard's launch pass runs its own cases alone.
  if (auto shard = options.shard_cases.find(bench.name); shard != options.shard_cases.end())
    keyed["shard_cases"] = shard->second;
  return common::sha256_hex(keyed.dump());
}

// Whether a base's fingerprints are kept from an earlier job on it, so no
// launch pass of the base is needed (a shard's are keyed by its cases there).
bool base_fingerprints_kept(const BenchConfig& bench, const PipelineOptions& options) {
  return options.base_commit && !options.fingerprint_cache_dir.empty() &&
         !options.shard_cases.contains(bench.name) &&
         cached_fingerprints(options.fingerprint_cache_dir,
                             fingerprint_key(*options.base_commit, bench, options));
}

// One side's fingerprints from a launch pass in its checkout; the base's
// are a commit's, kept for the next pull request on it. `started`: a python
// launch pass of that side already started, which has imported and waits
// for its go.
FingerprintSet side_fingerprints(const BenchConfig& bench, const RepoConfig& config,
                                 const PipelineOptions& options, const fs::path& checkout,
                                 PythonPreflight* started = nullptr) {
  PipelineOptions side = options;
  side.checkout = checkout;
  // A shard's cases that this checkout has: a pull request may add some.
  if (auto shard = side.shard_cases.find(bench.name);
      shard != side.shard_cases.end() && checkout != options.checkout) {
    const CaseListing listing =
        adapter_for(bench.format).list_cases({bench, config, checkout, *options.stop});
    std::set<std::string> there;
    for (const ListedCase& c : listing.cases) there.insert(c.name);
    std::erase_if(shard->second, [&](const std::string& name) { return !there.contains(name); });
  }
  const bool base = options.base_checkout && checkout == *options.base_checkout && options.base_commit &&
                    !options.fingerprint_cache_dir.empty();
  const std::string key = base ? fingerprint_key(*options.base_commit, bench, side) : "";
  if (base) {
    if (auto kept = cached_fingerprints(options.fingerprint_cache_dir, key)) {
      if (options.log)
        options.log("full_bench " + bench.name + ": fingerprints of base " +
                    options.base_commit->substr(0, 12) + " kept from an earlier job");
      return *kept;
    }
  }
  if (options.log) options.log("full_bench " + bench.name + ": fingerprints of " + checkout.string());
  FingerprintSet taken = started != nullptr ? fingerprints_of(started->launch_pass())
                                            : launch_pass_fingerprints(bench, config, side);
  if (base) keep_fingerprints(options.fingerprint_cache_dir, key, taken);
  return taken;
}

// A pull request's bench compared with its base before quick_bench, by the
// fingerprints of both sides' launch passes: the cases whose code is
// identical are not timed in quick_bench, and the job's audit is drawn from
// them all, whatever bench they are in.
struct BaseComparison {
  CaseListing listing;  // the head's, for full_bench
  FingerprintSet base;
  std::vector<std::string> identical;  // timed cases
  std::vector<std::string> changed;    // timed cases, or without a fingerprint
  std::set<std::string> audited;       // of `identical`, drawn for the audit
};

// full_bench, for every format: replicates through the measurement engine.
// `head_fingerprints`: the head's, from its preflight's launch pass.
BenchResult run_full_bench_of(const BenchConfig& bench, const RepoConfig& config,
                              const PipelineOptions& options, const FingerprintSet* head_fingerprints,
                              const BaseComparison* compared, std::shared_ptr<PreparedPasses> prepared,
                              const CaseListing* listing) {
  EngineOptions engine;
  engine.checkout = options.checkout;
  if (config.full_bench.ab) engine.base_checkout = options.base_checkout;
  engine.base_thresholds = options.base_thresholds;
  engine.project_thresholds = options.project_thresholds;
  engine.detection = options.detection;
  engine.stop = options.stop;
  engine.log = options.log;
  engine.only_cases = options.only_cases;
  engine.shard = options.shard;
  engine.audit_seed = audit_seed(options.job_id, options.commit, options.base_commit);
  if (head_fingerprints != nullptr) engine.head_fingerprints = *head_fingerprints;
  engine.prepared = std::move(prepared);
  if (compared != nullptr) {
    engine.listing = compared->listing;
    engine.base_fingerprints = compared->base;
    engine.audit_cases = compared->audited;
  } else if (listing != nullptr) {
    engine.listing = *listing;
  }
  // Without the injection library no module is seen, and without a GPU no
  // kernel is loaded (a CPU benchmark's): nothing is identical.
  if (options.gpu_available && find_inject_library())
    engine.fingerprint = [&](const fs::path& checkout) {
      return side_fingerprints(bench, config, options, checkout);
    };
  return run_full_bench(adapter_for(bench.format), bench, config, engine);
}

// What keeps a bench from starting at all, named as the user would look for
// it (the load stage's headline, not a loader's exit 127 in the log tail).
std::optional<std::string> bench_file_problem(const BenchConfig& bench, const RepoConfig& config,
                                              const PipelineOptions& options) {
  const fs::path file = options.checkout / bench.path;
  std::error_code ec;
  if (!fs::exists(file, ec))
    return "`" + bench.path + "`: no such file after the build (did the build write it elsewhere?)";
  if (fs::is_directory(file, ec)) return "`" + bench.path + "`: a directory, not the bench";
  if (bench.format == BenchFormat::python) return std::nullopt;  // a source, not an output
  if (access(file.c_str(), X_OK) != 0) return "`" + bench.path + "`: not executable (is it the built bench?)";
  if (options.build_started) {
    if (auto stale =
            stale_output_problem(file, options.checkout, *options.build_started, config.build_commands))
      return "`" + bench.path + "`: " + *stale;
  }
  return std::nullopt;
}

// One bench's stage, as its format runs it: full_bench through the
// measurement engine; a preflight stage through its adapter's hook.
BenchResult run_bench_stage(const BenchConfig& bench, StageName stage, const RepoConfig& config,
                            const PipelineOptions& options, const FingerprintSet* head_fingerprints = nullptr,
                            const BaseComparison* compared = nullptr,
                            std::shared_ptr<PreparedPasses> prepared = nullptr,
                            const CaseListing* listing = nullptr) {
  if (auto problem = bench_file_problem(bench, config, options)) {
    BenchResult result;
    result.status = "failed";
    result.message = bench.name + ": " + *problem;
    return result;
  }
  if (stage == StageName::full_bench)
    return run_full_bench_of(bench, config, options, head_fingerprints, compared, std::move(prepared),
                             listing);
  return adapter_for(bench.format).run_stage(stage, bench, config, options);
}

void merge_cases(json& cases, const json& incoming) {
  for (const json& c : incoming) {
    bool merged = false;
    for (json& existing : cases) {
      if (existing["name"] == c["name"]) {
        existing.update(c);
        merged = true;
        break;
      }
    }
    if (!merged) cases.push_back(c);
  }
}

// The build stage: incremental in the branch's tree, retried from scratch
// when that fails, since what an earlier commit left in the tree (a stale
// generated file, a cache from another configuration) must not fail this
// commit's build.
common::Stage run_build_stage(const RepoConfig& config, const PipelineOptions& opts, const Logger& log) {
  log("stage build started");
  log.started(StageName::build);
  double seconds = 0;
  std::string output;
  std::string compiler_cache;
  json tree = {{"kind", opts.built_from.empty() ? "fresh" : "incremental"}};
  if (!opts.built_from.empty()) tree["from"] = opts.built_from;
  auto clean_tree = [&](const std::string& reason) {
    tree = {{"kind", "clean"}, {"reason", reason}};
    try {
      opts.clean_build_tree();
      return std::string();
    } catch (const std::exception& error) {
      return std::string("cannot empty the build tree: ") + error.what();
    }
  };
  std::string failure;
  if (config.build_clean && opts.clean_build_tree && !opts.built_from.empty()) {
    log("build.clean: removing the outputs of " + opts.built_from.substr(0, 12) + "'s build first");
    failure = clean_tree("build.clean");
  }
  if (failure.empty())
    failure =
        build_checkout(config, opts.checkout, *opts.stop, output, seconds, opts.ccache_dir, &compiler_cache);
  std::string log_text;  // the stage's log: both attempts where there were two
  if (!failure.empty() && tree["kind"] == "incremental" && opts.clean_build_tree && !*opts.stop) {
    log("incremental build failed (" + failure + "); building from scratch");
    log_text = tail_of(output, 4000) + "\n--- the incremental build failed; from scratch: ---\n";
    output.clear();
    failure = clean_tree("the incremental build failed: " + failure);
    double clean_seconds = 0;
    if (failure.empty())
      failure = build_checkout(config, opts.checkout, *opts.stop, output, clean_seconds, opts.ccache_dir,
                               &compiler_cache);
    seconds += clean_seconds;
  }
  log_text += output;
  json details = {{"kernels", ptxas_report(output)},
                  {"commands", config.build_commands},
                  {"compiler_cache", compiler_cache},
                  {"tree", tree}};
  std::string status = failure.empty() ? "passed" : "failed";
  std::string message =
      failure.empty() ? std::to_string(config.build_commands.size()) + " command(s) succeeded" : failure;
  if (tree["kind"] == "clean" && tree["reason"] != "build.clean")
    message += " (from scratch, after the incremental build failed)";
  common::Stage stage = make_stage(StageName::build, status, seconds, 0, message, log_text, details);
  log("stage build " + status + " in " + seconds_text(seconds) + ": " + message);
  log.ended(stage);
  return stage;
}

bool runs_without_gpu(const BenchConfig& bench) {
  return adapter_for(bench.format).runs_without_gpu();
}

// Why `stage` does not run at all, if it does not.
std::optional<std::string> skip_reason(StageName stage, const std::string& failed_stage,
                                       const RepoConfig& config, const PipelineOptions& opts) {
  if (!failed_stage.empty()) return "not run: the " + failed_stage + " stage failed";
  if (!opts.only_stages.empty() &&
      std::find(opts.only_stages.begin(), opts.only_stages.end(), stage) == opts.only_stages.end())
    return std::string("not selected (kw run --stages)");
  // Without a GPU only the stages a CPU harness's bench runs there can run
  // (a benchmark in it that needs a GPU fails with its own error).
  const bool runs_on_cpu = common::stage_row(stage).runs_without_gpu &&
                           std::any_of(config.benches.begin(), config.benches.end(), runs_without_gpu);
  if (!opts.gpu_available && !runs_on_cpu) return std::string("no CUDA device");
  return std::nullopt;
}

// The stages after the build, and what they share: a kwbench bench's
// preflight stages run in one invocation, in the load stage, and each stage
// then takes its part.
struct BenchStages {
  BenchStages(const RepoConfig& c, const PipelineOptions& o, const Logger& l) : config(c), opts(o), log(l) {}

  const RepoConfig& config;
  const PipelineOptions& opts;
  const Logger& log;
  std::map<std::string, std::map<StageName, BenchResult>> preflight;
  std::set<StageName> announced;  // stages whose start the preflight already gave out
  bool whole_preflight = false;
  json cases = json::array();
  json device;
  double gpu_seconds = 0;
  std::map<std::string, FingerprintSet> fingerprints;  // the head's, by bench, from launch_geometry
  std::map<std::string, BaseComparison> against_base;  // by bench, from compare_with_base
  // python: full_bench's first processes, by bench, started by compare_with_base
  std::map<std::string, std::shared_ptr<PreparedPasses>> prepared_processes;
  // python: each bench's preflight in one process, started by its load stage
  std::map<std::string, std::unique_ptr<PythonPreflight>> python_preflights;
  // python: each bench's cases, as its preflight listed them
  std::map<std::string, CaseListing> preflight_listings;
  // python: the base's launch passes, importing while the head's preflight runs
  std::map<std::string, std::unique_ptr<PythonPreflight>> base_launch_passes;
  bool compared_with_base = false;

  // A pull request's bench whose cases may skip quick_bench and full_bench:
  // both sides' fingerprints can be taken, and compared case by case.
  bool skips_identical(const BenchConfig& bench) const {
    return opts.base_checkout && config.full_bench.ab && config.full_bench.skip_identical &&
           opts.gpu_available && opts.only_cases.empty() && adapter_for(bench.format).speaks_kwbench() &&
           find_inject_library();
  }

  // Each such bench's head fingerprints (its launch_geometry's, else a
  // launch pass's) against the base's, once, before the first timed stage; then the job's audit drawn
  // over every bench's identical cases at once, so a job pays for the audit
  // share once and not once a bench. Returns the GPU seconds of the base's
  // launch passes.
  double compare_with_base() {
    if (compared_with_base) return 0;
    compared_with_base = true;
    double seconds = 0;
    std::vector<std::pair<std::string, std::string>> identical;  // bench, case
    for (const BenchConfig& bench : config.benches) {
      if (!skips_identical(bench) || opts.stop->load()) continue;
      auto head = fingerprints.find(bench.name);
      if (head == fingerprints.end()) {  // no launch_geometry ran (--stages): a launch pass of its own
        FingerprintSet taken = side_fingerprints(bench, config, opts, opts.checkout);
        seconds += taken.seconds;
        head = fingerprints.emplace(bench.name, std::move(taken)).first;
      }
      // With an audit, every bench with a case times at least one, changed or
      // not: its processes import while its cases are listed and compared.
      if (config.full_bench.audit_share > 0) prepare_full_bench(bench);
      CaseListing listing = listing_of(bench);
      if (!listing.ok || listing.cases_from_first_pass) continue;  // full_bench says why, and times it whole
      BaseComparison compared;
      compared.listing = std::move(listing);
      compared.base = base_fingerprints(bench);
      seconds += compared.base.seconds;
      for (const ListedCase& c : compared.listing.cases) {
        auto mine = head->second.cases.find(c.name);
        if (!c.timed || mine == head->second.cases.end()) continue;  // untimed, or another shard's
        if (identical_code(mine->second, compared.base.of(c.name))) {
          compared.identical.push_back(c.name);
          identical.emplace_back(bench.name, c.name);
        } else {
          compared.changed.push_back(c.name);
        }
      }
      against_base.emplace(bench.name, std::move(compared));
    }
    std::shuffle(identical.begin(), identical.end(),
                 std::mt19937_64(audit_seed(opts.job_id, opts.commit, opts.base_commit)));
    identical.resize(
        std::min(identical.size(), audit_count(identical.size(), config.full_bench.audit_share)));
    for (const auto& [bench, name] : identical) against_base[bench].audited.insert(name);
    for (const BenchConfig& bench : config.benches) {
      auto compared = against_base.find(bench.name);
      if (compared != against_base.end() &&
          (!compared->second.changed.empty() || !compared->second.audited.empty()))
        prepare_full_bench(bench);
    }
    return seconds;
  }

  // A bench's cases: from its python preflight where one listed them (a
  // listing process imports as long as a stage does), else by listing.
  CaseListing listing_of(const BenchConfig& bench) {
    if (const CaseListing* kept = listed(bench)) return *kept;
    return adapter_for(bench.format).list_cases({bench, config, opts.checkout, *opts.stop});
  }

  const CaseListing* listed(const BenchConfig& bench) const {
    auto it = preflight_listings.find(bench.name);
    return it == preflight_listings.end() ? nullptr : &it->second;
  }

  // A python pull request's base launch pass starts with the head's
  // preflight and imports beside it, then waits: its GPU work runs once the
  // head's preflight waits for quick_bench's cases, its cached GPU memory
  // given back, so the two never share the GPU. Not where the base's
  // fingerprints are kept from an earlier job.
  void start_base_launch_pass(const BenchConfig& bench) {
    if (!opts.base_checkout || base_fingerprints_kept(bench, opts) || opts.shard_cases.contains(bench.name))
      return;
    PipelineOptions base = opts;
    base.checkout = *opts.base_checkout;
    base_launch_passes[bench.name] =
        PythonPreflight::start(bench, config, base, {.case_stages = 1, .starts_on_go = true});
  }

  FingerprintSet base_fingerprints(const BenchConfig& bench) {
    auto started = base_launch_passes.find(bench.name);
    if (started == base_launch_passes.end() || !started->second)
      return side_fingerprints(bench, config, opts, *opts.base_checkout);
    FingerprintSet taken = side_fingerprints(bench, config, opts, *opts.base_checkout, started->second.get());
    base_launch_passes.erase(started);
    log("full_bench " + bench.name +
        ": fingerprints of the base from its launch pass, imported beside the "
        "head's preflight (" +
        seconds_text(taken.seconds) + ")");
    return taken;
  }

  // A python bench with cases to time: full_bench's first replicate
  // processes start now and import while the preflight goes on.
  void prepare_full_bench(const BenchConfig& bench) {
    if (bench.format != BenchFormat::python || !config.full_bench.prepare_processes) return;
    std::shared_ptr<PreparedPasses>& prepared = prepared_processes[bench.name];
    if (!prepared) prepared = std::make_shared<PreparedPasses>(*opts.stop);
    const BenchAdapter& adapter = adapter_for(bench.format);
    adapter.prepare_passes({bench, config, *opts.base_checkout, *opts.stop, prepared.get()});
    adapter.prepare_passes({bench, config, opts.checkout, *opts.stop, prepared.get()});
  }

  // quick_bench of a bench compared with its base: its changed cases alone.
  BenchResult quick_bench_of_changed(const BenchConfig& bench, const BaseComparison& compared) {
    const std::string note =
        std::to_string(compared.identical.size()) + " case(s) run code identical to the base's: not timed";
    log("quick_bench " + bench.name + ": " + std::to_string(compared.changed.size()) + " case(s) changed, " +
        note);
    auto process = python_preflights.find(bench.name);
    const bool waiting = process != python_preflights.end() && process->second->waits_for_cases();
    if (compared.changed.empty()) {
      if (waiting) process->second->time_cases({});
      BenchResult result;
      result.status = "passed";
      result.message = bench.name + ": " + note;
      result.details = {{"identical_to_base", compared.identical.size()}};
      return result;
    }
    BenchResult result;
    if (waiting) {  // its preflight's process, imported, times them
      process->second->time_cases(compared.changed);
      result = process->second->result(StageName::quick_bench);
    } else {
      PipelineOptions changed_only = opts;
      changed_only.shard_cases[bench.name] = compared.changed;
      result = run_bench_stage(bench, StageName::quick_bench, config, changed_only);
    }
    if (!compared.identical.empty()) {
      result.message += "; " + note;
      result.details["identical_to_base"] = compared.identical.size();
    }
    return result;
  }

  void announce(StageName stage) {
    if (!announced.insert(stage).second) return;
    log("stage " + std::string(common::to_string(stage)) + " started");
    log.started(stage);
  }

  // This bench's result in `stage` from its preflight, if it ran one.
  std::optional<BenchResult> from_preflight(const BenchConfig& bench, StageName stage) {
    if (stage == StageName::full_bench || !whole_preflight || bench_file_problem(bench, config, opts))
      return std::nullopt;
    if (bench.format == BenchFormat::python) return from_python_preflight(bench, stage);
    if (bench.format != BenchFormat::kwbench) return std::nullopt;
    if (stage == StageName::load) {
      if (auto results = run_kwbench_preflight(
              bench, config, opts, [&](StageName s) { announce(s); }, skips_identical(bench)))
        preflight[bench.name] = std::move(*results);
      else
        log(bench.name + ": its kwbench has no --stage preflight (an older harness): a process per stage");
    }
    auto it = preflight.find(bench.name);
    if (it == preflight.end()) return std::nullopt;
    if (auto found = it->second.find(stage); found != it->second.end()) return found->second;
    // Left out by design: the changed cases run apart.
    if (stage == StageName::quick_bench && skips_identical(bench) &&
        it->second.rbegin()->second.status != "failed")
      return std::nullopt;
    // The preflight stopped before this stage: its last stage says why.
    const auto& [last_stage, last] = *it->second.rbegin();
    BenchResult skipped;
    skipped.status = "skipped";
    skipped.message = last.status == "skipped"
                          ? last.message
                          : bench.name + ": not run, its " + std::string(common::to_string(last_stage)) +
                                " stage " + last.status;
    return skipped;
  }

  // A python bench's stage from its preflight's process, started by its
  // load stage; nullopt: a process of its own (no libkw_inject.so), or
  // quick_bench of the cases whose code changed (quick_bench_of_changed).
  std::optional<BenchResult> from_python_preflight(const BenchConfig& bench, StageName stage) {
    if (stage == StageName::load) {
      const bool waits = skips_identical(bench);
      std::unique_ptr<PythonPreflight> started =
          PythonPreflight::start(bench, config, opts, {.quick_bench_waits = waits});
      if (!started) return std::nullopt;
      python_preflights[bench.name] = std::move(started);
      if (waits) start_base_launch_pass(bench);
      if (auto listed = python_preflights[bench.name]->listing()) preflight_listings[bench.name] = *listed;
    }
    auto it = python_preflights.find(bench.name);
    if (it == python_preflights.end()) return std::nullopt;
    if (stage == StageName::quick_bench && it->second->waits_for_cases()) {
      if (against_base.contains(bench.name)) return std::nullopt;
      it->second->time_every_case();  // its cases could not be compared: quick_bench times them all
    }
    return it->second->result(stage);
  }

  common::Stage run(StageName stage) {
    announce(stage);
    const auto stage_started = std::chrono::steady_clock::now();
    double seconds = 0;
    std::string message;
    std::string tail;
    json details = json::object();
    int failed = 0, passed = 0;
    bool all_from_preflight = true;  // then the stage's cost is its part of the preflight
    if (stage == StageName::quick_bench || stage == StageName::full_bench) seconds += compare_with_base();
    for (const BenchConfig& bench : config.benches) {
      if (!opts.gpu_available && !runs_without_gpu(bench)) {
        message += (message.empty() ? "" : "; ") + bench.name + ": skipped, no CUDA device";
        continue;
      }
      std::optional<BenchResult> preflight_result = from_preflight(bench, stage);
      all_from_preflight = all_from_preflight && preflight_result.has_value();
      auto head = fingerprints.find(bench.name);
      auto compared = against_base.find(bench.name);
      BenchResult result = preflight_result ? std::move(*preflight_result)
                           : stage == StageName::quick_bench && compared != against_base.end()
                               ? quick_bench_of_changed(bench, compared->second)
                               : run_bench_stage(bench, stage, config, opts,
                                                 head == fingerprints.end() ? nullptr : &head->second,
                                                 compared == against_base.end() ? nullptr : &compared->second,
                                                 prepared_processes[bench.name], listed(bench));
      if (stage == StageName::launch_geometry && result.status == "passed")
        fingerprints[bench.name] = fingerprints_of(result);
      // Its preflight's process has nothing more to do for this job.
      if (result.status == "failed" || stage == StageName::quick_bench) python_preflights.erase(bench.name);
      if (stage == StageName::correctness && result.status != "failed" && !bench.sanitize_tools.empty() &&
          opts.gpu_available)
        sanitize(result, adapter_for(bench.format), bench, config, opts);
      seconds += result.seconds;
      message += (message.empty() ? "" : "; ") + result.message;
      if (!result.log_tail.empty()) tail += "--- " + bench.name + "\n" + result.log_tail;
      details[bench.name] = result.details;
      if (device.is_null() && result.device.is_object()) device = result.device;
      merge_cases(cases, result.cases);
      failed += result.status == "failed";
      passed += result.status == "passed";
      if (opts.stop->load()) break;
    }
    gpu_seconds += seconds;
    std::string status = failed > 0 ? "failed" : passed > 0 ? "passed" : "skipped";
    const double wall = all_from_preflight ? seconds : seconds_since(stage_started);
    common::Stage ended = make_stage(stage, status, wall, seconds, message, tail, details);
    // A host without a GPU runs CPU benchmarks: their time is the CPU's.
    log("stage " + std::string(common::to_string(stage)) + " " + status + " in " + seconds_text(wall) + " (" +
        seconds_text(seconds) + (opts.gpu_available ? " on the GPU" : " on the CPU") + "): " + message);
    log.ended(ended);
    return ended;
  }
};

// A bench that says nothing of its device (Google Benchmark, NVBench's
// summaries) ran on this host's GPU, or on a host without one its CPU:
// that is what its baselines are keyed by. A run that failed before any
// bench said (a build, a load) is this host's GPU's too: it belongs in
// that GPU model's history, not in "none".
json run_device(json device, const json& cases, const PipelineOptions& opts, const Logger& log) {
  const bool measured = std::any_of(cases.begin(), cases.end(), [](const json& c) {
    return !c.value("measurements", json::array()).empty();
  });
  if (device.is_null() && opts.gpu_available) {
    device = host_gpu_device();
    if (device.is_null()) log("no device in the bench output and none from the CUDA driver");
  }
  if (device.is_null() && measured && !opts.gpu_available) device = host_cpu_device();
  return device;
}

// A shard's part of each bench that speaks kwbench's command line, for its
// preflight's --case-list (full_bench splits every format's itself). The
// timed cases are dealt as full_bench deals them, so a shard's preflight
// fingerprints every case it times; the correctness-only ones are dealt
// apart. A bench whose cases cannot be listed runs whole: its load stage
// says why.
void split_cases(const RepoConfig& config, PipelineOptions& opts, const Logger& log) {
  if (!opts.shard || opts.shard->count < 2) return;
  for (const BenchConfig& bench : config.benches) {
    const BenchAdapter& adapter = adapter_for(bench.format);
    if (!adapter.speaks_kwbench() || bench_file_problem(bench, config, opts)) continue;
    const CaseListing listing = adapter.list_cases({bench, config, opts.checkout, *opts.stop});
    if (!listing.ok) {
      log(bench.name + ": cannot list its cases to take shard " + common::to_string(*opts.shard) +
          "'s: " + listing.failure);
      continue;
    }
    std::vector<std::string> names, timed, untimed;
    for (const ListedCase& c : listing.cases) {
      names.push_back(c.name);
      (c.timed ? timed : untimed).push_back(c.name);
    }
    const common::ShardSplit timed_split(timed, *opts.shard), untimed_split(untimed, *opts.shard);
    std::vector<std::string>& mine = opts.shard_cases[bench.name];
    for (const std::string& name : names) {
      if (timed_split.contains(name) || untimed_split.contains(name)) mine.push_back(name);
    }
    log(bench.name + ": shard " + common::to_string(*opts.shard) + ", " + std::to_string(mine.size()) +
        " of its " + std::to_string(names.size()) + " cases");
  }
}

}  // namespace

bool full_bench_runs_here(const RepoConfig& config, bool gpu_available) {
  return gpu_available || std::any_of(config.benches.begin(), config.benches.end(), runs_without_gpu);
}

json run_pipeline(const RepoConfig& config, const PipelineOptions& options) {
  static const std::atomic<bool> never{false};
  PipelineOptions opts = options;
  if (opts.stop == nullptr) opts.stop = &never;
  Logger log{opts};
  std::string started_at = utc_now_rfc3339();
  if (opts.base_commit) opts.base_thresholds = committed_thresholds(opts.checkout, *opts.base_commit, log);
  opts.build_started = fs::file_time_type::clock::now();
  std::vector<common::Stage> stages = {run_build_stage(config, opts, log)};
  std::string failed_stage = stages.back().status == common::StageStatus::failed ? "build" : "";

  if (failed_stage.empty()) split_cases(config, opts, log);
  BenchStages benches{config, opts, log};
  const std::vector<StageName> preflight = common::preflight_stages();
  benches.whole_preflight =
      opts.only_stages.empty() || std::all_of(preflight.begin(), preflight.end(), [&](StageName s) {
        return std::find(opts.only_stages.begin(), opts.only_stages.end(), s) != opts.only_stages.end();
      });
  for (StageName stage : common::kAllStages) {
    if (stage == StageName::build) continue;
    if (auto reason = skip_reason(stage, failed_stage, config, opts)) {
      stages.push_back(make_stage(stage, "skipped", 0, 0, *reason));
      log("stage " + std::string(common::to_string(stage)) + " skipped: " + *reason);
      log.ended(stages.back());
      continue;
    }
    stages.push_back(benches.run(stage));
    if (stages.back().status == common::StageStatus::failed && common::stage_row(stage).failure_skips_later)
      failed_stage = common::to_string(stage);
  }

  json device = run_device(std::move(benches.device), benches.cases, opts, log);
  common::RunReport report = report_head(config.project, opts, started_at);
  report.thresholds = config.thresholds;
  report.base_thresholds = opts.base_thresholds;
  report.gpu_seconds = benches.gpu_seconds;
  report.stages = std::move(stages);
  // The cases and the device come from the benches' JSON: they join the
  // typed report through its parser, which validates them, so what is sent
  // is nothing the model does not know.
  json document = common::to_json(report);
  document["cases"] = std::move(benches.cases);
  if (device.is_object()) document["device"] = std::move(device);
  return common::to_json(common::parse_run_report(document));
}

json config_failure_report(const std::string& project, const ConfigError& error,
                           const PipelineOptions& options) {
  Logger log{options};
  const std::string started_at = utc_now_rfc3339();
  log("stage config failed: " + std::string(error.what()));
  std::string listed;
  for (const std::string& problem : error.problems()) listed += problem + "\n";
  std::vector<common::Stage> stages = {make_stage(StageName::config, "failed", 0, 0, error.what(), listed)};
  log.ended(stages.back());
  for (StageName stage : common::kAllStages) {
    stages.push_back(make_stage(stage, "skipped", 0, 0, "not run: the config stage failed"));
    log.ended(stages.back());
  }
  common::RunReport report = report_head(project, options, started_at);
  report.stages = std::move(stages);
  json document = common::to_json(report);
  if (options.gpu_available) {
    json device = host_gpu_device();
    if (device.is_object()) document["device"] = std::move(device);
  }
  return common::to_json(common::parse_run_report(document));
}

}  // namespace kw::agent
