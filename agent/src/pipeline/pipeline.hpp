// The stages of one run over one checkout: build, then each bench's load,
// launch_geometry, correctness, quick_bench and full_bench, every command a
// child process group with its timeout, stopping at the first failed
// preflight stage. Produces a validated run report.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"
#include "pipeline/pipeline_options.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

// Whether full_bench measures anything on this host: on a GPU, or on a CPU
// host where some bench is of a CPU harness (Google Benchmark). A pull
// request's base is built for its A/B only then.
bool full_bench_runs_here(const RepoConfig& config, bool gpu_available);

// Returns the run report (valid kernelwatch.run/1).
nlohmann::json run_pipeline(const RepoConfig& config, const PipelineOptions& options);

// The report of a commit whose kernelwatch.json cannot be used: its config
// stage failed with `error`'s problems and nothing else ran. `project` is
// the job's (the file may not say it).
nlohmann::json config_failure_report(const std::string& project, const ConfigError& error,
                                     const PipelineOptions& options);

}  // namespace kw::agent
