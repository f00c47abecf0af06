// kernelwatch.json: how kernelwatch builds and benchmarks a tracked repository
// (documented in docs/repo-config.md).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"

namespace kw::agent {

// python: a script using kernels/python/kwbench.py, which speaks kwbench's
// command line.
enum class BenchFormat { kwbench, gbench, nvbench, python };

struct LibraryCheck {
  std::string path;
  std::vector<std::string> symbols;
};

// What launches of a kernel must look like, for benches that do not declare
// their launches themselves (gbench, NVBench): checked in launch_geometry on
// the launches libkw_inject.so records in the bench's processes.
struct LaunchExpectation {
  std::string kernel;  // glob over the demangled name
  std::optional<std::array<std::int64_t, 3>> block, grid;
  std::optional<std::int64_t> max_registers;
  std::optional<std::int64_t> max_shared_bytes;  // static + dynamic
  bool must_launch = true;
};

struct BenchConfig {
  std::string name;
  std::string path;  // relative to the repository root
  BenchFormat format = BenchFormat::kwbench;
  std::vector<std::string> args;
  std::string cases = "*";  // kwbench --case glob
  std::vector<LibraryCheck> libraries;
  // gbench and NVBench: the launch expectations, the arguments of the one
  // short pass they are observed in (empty: the format's own, e.g. NVBench's
  // --profile), and the correctness stage's command (argv, run in the
  // checkout; empty: no correctness stage).
  std::vector<LaunchExpectation> launches;
  std::vector<std::string> launch_args;
  std::vector<std::string> check;
  double check_timeout_s = 600;
  // compute-sanitizer tools run in correctness ("memcheck", "racecheck",
  // "initcheck", "synccheck"; empty: none) over the correctness workload
  // (kwbench) or the launch pass (other harnesses), and the kwbench cases
  // they run (empty: `cases`).
  std::vector<std::string> sanitize_tools;
  std::string sanitize_cases;
  // python: the interpreter (a path in the repository, e.g. a virtual
  // environment's, or a name looked up in PATH) and the modules its load
  // stage imports besides those the script names.
  std::string interpreter = "python3";
  std::vector<std::string> modules;
  // A python bench in a form the repository already has, run by kwbench.py
  // (`python3 -m kwbench --perf-report SCRIPT`, `--do-bench SCRIPT` or
  // `--tritonbench OPERATOR`): "perf_report" (a triton.testing.perf_report
  // script), "do_bench" (a script timing its kernels with do_bench) or
  // "tritonbench" (an operator in TritonBench's layout); empty: a kwbench.py
  // script. And the provider that runs the repository's kernel (empty:
  // kwbench.py's default, the one that says triton, else the first).
  std::string form;
  std::string candidate;
  // perf_report: keywords for the benchmark functions that their benchmarks
  // do not give, each a Python expression (`--run-arg NAME=EXPRESSION`).
  std::map<std::string, std::string> run_args;
};

// The argv that starts `bench` in `checkout`: its executable, for a python
// bench the interpreter and the script, for a perf_report, do_bench or
// tritonbench bench the interpreter running kwbench.py over it.
std::vector<std::string> bench_command(const BenchConfig& bench, const std::filesystem::path& checkout);

// full_bench as replicates (docs/repo-config.md, docs/detection.md).
struct FullBenchConfig {
  int replicates = 4;               // first pass, per side
  int max_replicates = 8;           // per side, adaptive passes included
  int confirm_replicates = 4;       // added per side to a case the first pass screens (A/B)
  int resolve_replicates = 16;      // per side: an inconclusive A/B case is measured up to this
  double budget_s = 200;            // GPU seconds of the whole stage per side (A/B: twice this in all)
  double replicate_seconds = 0.25;  // time cap of one case in one replicate
  double target_se = 0.0025;        // stop adding replicates once log-level standard error is under this
  int min_samples = 10;             // per case per replicate
  int max_samples = 200;            // per case per replicate
  double noise_target = 0.005;      // a replicate stops early once its samples are this quiet
  bool ab = true;                   // measure base_commit's build in the same job when there is one
  bool context_pass = true;         // one replicate of the baselines, for the speedup series (not in A/B)
  bool prepare_processes = true;    // python: a replicate's process imports while the GPU times another
  bool prepare_context = false;     // ... and makes its CUDA context before its turn too
  // A/B: a case whose fingerprint equals the base's is "unchanged: identical
  // code" without timing, but for an audited share of them (at least one).
  bool skip_identical = true;
  double audit_share = 0.05;
  // Per case per replicate: the candidate runs back to back this long for
  // NVML's energy counter after its timed rounds (0: no energy measured).
  double energy_seconds = 0;
};

struct RepoConfig {
  std::string project;
  std::vector<std::string> build_commands;
  double build_timeout_s = 1800;
  std::map<std::string, std::string> build_env;
  // Every build from scratch: the agent empties its build tree of the last
  // commit's outputs first (for builds that are not safe incrementally).
  bool build_clean = false;
  std::vector<BenchConfig> benches;
  std::map<common::StageName, double> stage_timeouts_s;
  FullBenchConfig full_bench;
  common::Thresholds thresholds;

  double timeout_for(common::StageName stage) const;
};

// kernelwatch.json's shape, every problem at once, each naming its field:
// unknown keys with the nearest known one ("benchs: unknown field; did you
// mean `benches`?"), missing fields, wrong types, unknown values.
std::vector<std::string> repo_config_problems(const nlohmann::json& document);

// A kernelwatch.json that cannot be used: a configuration mistake, failed as
// the `config` stage (never retried: the commit says the same every time).
// what(): its first line names the first problem.
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// Throws ConfigError with every problem at once: the shape's, and each rule
// broken ("benches[1].name: duplicate bench name"), a value that breaks one
// left out to reach the next.
RepoConfig parse_repo_config(const nlohmann::json& document);
// "line L, column C" of a byte offset as nlohmann's parse_error counts it
// (from 1, the character it could not take).
std::string line_and_column(const std::string& text, std::size_t byte);
// `file` read and parsed; a missing file or invalid JSON is a ConfigError too.
RepoConfig load_repo_config(const std::filesystem::path& file);

std::string_view to_string(BenchFormat format);

}  // namespace kw::agent
