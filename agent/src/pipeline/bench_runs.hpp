// A bench's stage run as its harness speaks: kwbench's command line (one
// stage, or the whole preflight in one invocation) and a python bench
// through kwbench.py (the adapted harnesses' checks are bench_checks.hpp).
#pragma once

#include <functional>
#include <map>
#include <optional>

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
