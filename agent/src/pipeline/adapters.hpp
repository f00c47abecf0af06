// Every bench format behind one interface. The measurement engine
// (measurement_engine.hpp) lists a bench's cases and measures them a
// replicate at a time through it, whatever wrote the bench; the preflight
// stages of another harness's bench use its one-pass and listing arguments.
//
// kwbench and python benches (kernels/python/kwbench.py) speak kwbench's
// command line; Google Benchmark's JSON gives each repetition's real (or
// manual) time as a sample; NVBench's JSON written with --jsonbin gives
// per-sample cold GPU times (or CPU times of cpu_only benchmarks) and SM
// clocks from its binary sidecars, the summary's mean as one sample when a
// sidecar is missing, said in the notes.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/bench_result.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

class PreparedPasses;
struct PipelineOptions;

// One bench in one checkout.
struct BenchContext {
  const BenchConfig& bench;
  const RepoConfig& config;
  std::filesystem::path checkout;
  const std::atomic<bool>& stop;
  // full_bench of a python bench: replicate processes started ahead of their
  // turn (prepared_passes.hpp); none elsewhere.
  PreparedPasses* prepared = nullptr;
};

struct ListedCase {
  std::string name;
  bool has_baselines = false;  // baseline implementations to time for context
  bool timed = true;           // false: a correctness-only case, which full_bench leaves out
};

// The cases a bench would measure. A harness that cannot name them without
// running (NVBench's states) lists the groups it runs them by instead
// (NVBench's benchmarks), and its first replicate names the cases.
struct CaseListing {
  bool ok = false;
  std::string failure;  // why not
  std::string log_tail;
  std::vector<ListedCase> cases;
  std::vector<std::string> groups;
  bool cases_from_first_pass = false;
};

// One replicate: the bench run once, in a fresh process, over these cases.
struct PassRequest {
  std::vector<std::string> cases;   // in the order to run them; empty: every case
  std::vector<std::string> groups;  // NVBench: the benchmarks, in the order to run them
  std::uint64_t order_seed = 1;
  bool baselines = false;  // time the baseline implementations instead of the candidate
};

struct PassOutput {
  bool ok = false;      // the bench wrote a result
  std::string failure;  // why it did not; or, with ok, what failed in it
  std::string log_tail;
  double seconds = 0;
  // Where a kwbench pass's time went: per-case setup against timed rounds,
  // and its start to its result written (the rest is the process's exit).
  double setup_seconds = 0, measure_seconds = 0, result_seconds = 0;
  nlohmann::json cases = nlohmann::json::array();  // report cases with "measurements"
  nlohmann::json device;                           // the bench's own word on its GPU, if any
  std::vector<std::string> notes;                  // what was left out, skipped, throttled or approximated
  // Time the harness spent on what kernelwatch does not read (NVBench's
  // batched measurement where it cannot be turned off), and what: "went to ...".
  double unread_seconds = 0;
  std::string unread;
};

class BenchAdapter {
 public:
  virtual ~BenchAdapter() = default;
  virtual std::string harness() const = 0;  // for messages: "Google Benchmark"
  // kwbench's command line: the pipeline runs the preflight stage by stage
  // through it; the others get the agent's own checks.
  virtual bool speaks_kwbench() const { return false; }
  // Whether its benches can run on a host without a GPU (CPU benchmarks).
  virtual bool runs_without_gpu() const = 0;
  // What the harness cannot observe, for the stage's message (empty: nothing).
  virtual std::string unobserved() const { return {}; }
  // Arguments of the shortest run that still launches every kernel: the
  // launch_geometry pass (what the bench in `context` accepts).
  virtual std::vector<std::string> one_pass_args(const BenchContext& /*context*/) const { return {}; }
  // Arguments that list the benchmarks and exit, touching no kernel: the
  // load stage's run under LD_BIND_NOW.
  virtual std::vector<std::string> list_args() const { return {}; }

  // The one hook per preflight stage a format has (full_bench is the
  // measurement engine's, through list_cases and measure). By default, the
  // agent's own checks of another harness's bench: load through its listing,
  // launch_geometry through libkw_inject.so, correctness by its check
  // command; its other stages are skipped, saying why.
  virtual BenchResult run_stage(common::StageName stage, const BenchConfig& bench, const RepoConfig& config,
                                const PipelineOptions& options) const;
  // The launch pass alone, for one side's fingerprints.
  virtual BenchResult launch_pass(const BenchConfig& bench, const RepoConfig& config,
                                  const PipelineOptions& options) const;

  virtual CaseListing list_cases(const BenchContext& context) const = 0;
  virtual PassOutput measure(const BenchContext& context, const PassRequest& request) const = 0;
  // Starts this side's processes for the passes to come, where the harness
  // prepares them (context.prepared): a python bench imports while another
  // pass runs.
  virtual void prepare_passes(const BenchContext& /*context*/) const {}
};

const BenchAdapter& adapter_for(BenchFormat format);

// Google Benchmark's output as {"cases": [...]}, ready to merge into a
// report; throws std::runtime_error naming what is wrong with the input
// (exposed for tests; NVBench's reader is in nvbench_adapter.hpp).
nlohmann::json adapt_gbench(const nlohmann::json& output, const std::string& prefix);
// `text` with what a POSIX extended or ECMAScript regular expression would
// read as an operator escaped.
std::string regex_literal(const std::string& text);
// Google Benchmark's --benchmark_filter for exactly these names.
std::string gbench_filter(const std::vector<std::string>& names);

}  // namespace kw::agent
