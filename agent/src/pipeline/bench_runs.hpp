// A bench's stage run as its harness speaks: kwbench's command line (one
// stage, or the whole preflight in one invocation) and a python bench
// through kwbench.py (the adapted harnesses' checks are bench_checks.hpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/adapters.hpp"
#include "pipeline/bench_checks.hpp"
#include "pipeline/pipeline_options.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

// One stage of a bench that speaks kwbench's command line, its launches
// fingerprinted where libkw_inject.so recorded them.
BenchResult run_kwbench(const BenchConfig& bench, common::StageName stage, const RepoConfig& config,
                        const PipelineOptions& options);

// One stage of a python bench, through kwbench.py in the bench's interpreter.
BenchResult run_python(const BenchConfig& bench, common::StageName stage, const RepoConfig& config,
                       const PipelineOptions& options);

// A python bench's preflight in one interpreter (kwbench.py --stage
// preflight): load, then launch_geometry, correctness and quick_bench as
// steps of one process that imported torch, Triton and the bench once, each
// still its own stage with its own result and time. libkw_inject.so is in
// the process from its start and records the load and launch_geometry only.
// Each stage's result is read as the process writes it; a stage the process
// died in fails with the process's outcome, and the stages after a failed
// one do not run. A case that breaks the CUDA context fails and the cases
// after it run in a fresh process image (kwbench.py). The process ends when
// its last stage is read, or with this object.
class PythonPreflight {
 public:
  struct Plan {
    int case_stages = 3;             // of the three per-case stages (1: launch_geometry, a launch pass)
    bool quick_bench_waits = false;  // after correctness it waits for quick_bench's cases (time_cases)
    bool starts_on_go = false;       // it imports, then waits for go() before any CUDA work
  };
  // Starts the process: load and `plan.case_stages`. nullptr without
  // libkw_inject.so (run_python's launch_geometry says what is missing).
  static std::unique_ptr<PythonPreflight> start(const BenchConfig& bench, const RepoConfig& config,
                                                const PipelineOptions& options, Plan plan);
  PythonPreflight(const PythonPreflight&) = delete;
  PythonPreflight& operator=(const PythonPreflight&) = delete;
  ~PythonPreflight();

  // The stage's result once the process wrote it, or ended without it.
  BenchResult result(common::StageName stage);
  // Its cases as `--list` names them (over the bench's glob, a shard's
  // others too), once its load ended; nullopt before, or where it wrote none.
  std::optional<CaseListing> listing();
  // A process started on go: its stages may start now.
  void go();
  // A launch pass's result: launch_geometry's, or load's where it failed.
  BenchResult launch_pass();
  // quick_bench's cases, for a process that waits for them (none: it ends).
  void time_cases(const std::vector<std::string>& cases);
  void time_every_case();  // its cases could not be compared with the base's
  bool waits_for_cases() const;

 private:
  PythonPreflight() = default;
  void read_stages();
  static void write_go(const std::filesystem::path& file, const nlohmann::json& go);
  struct Process;
  std::unique_ptr<Process> process_;
};

// A python bench's launch pass (its fingerprints): a preflight through
// launch_geometry, so that both sides of a pull request are fingerprinted
// in processes started alike.
BenchResult python_launch_pass(const BenchConfig& bench, const RepoConfig& config,
                               const PipelineOptions& options);

// load, launch_geometry, correctness and quick_bench of a kwbench bench in
// one invocation: each case set up once for its three per-case stages. The
// stages it did not reach (an earlier one failed) are absent. nullopt: the
// bench predates --stage preflight (its harness is older), so each stage
// runs on its own.
// `on_started(stage)`: the bench began a per-case stage (its line
// "[kwbench] stage NAME started"). `without_quick_bench`: it stops after
// correctness (a pull request times only the cases whose code changed, and
// which those are is known from the launch pass's fingerprints).
std::optional<std::map<common::StageName, BenchResult>> run_kwbench_preflight(
    const BenchConfig& bench, const RepoConfig& config, const PipelineOptions& options,
    const std::function<void(common::StageName)>& on_started, bool without_quick_bench);

}  // namespace kw::agent
