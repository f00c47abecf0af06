// The preflight stages of benches that kernelwatch does not run through
// kwbench (Google Benchmark, NVBench): load (load_check.hpp), launch_geometry
// through libkw_inject.so (launch_check.hpp) and correctness by a check
// command; and compute-sanitizer over the correctness workload of any bench.
// Each runs the bench's processes; what they find is parsed by the checks'
// own files.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/adapters.hpp"
#include "pipeline/bench_result.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/pipeline_options.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

// An empty file /tmp/kw-stage-XXXXXX-<tag>.json for a child to write.
std::filesystem::path temp_json(const std::string& tag);

BenchResult run_adapted_load(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
                             const PipelineOptions& options);
// for_fingerprints: run the pass even without launch expectations, for the
// fingerprints alone (details.fingerprint).
BenchResult run_injected_launches(const BenchAdapter& adapter, const BenchConfig& bench,
                                  const RepoConfig& config, const PipelineOptions& options,
                                  bool for_fingerprints = false);
BenchResult run_check_command(const BenchConfig& bench, const PipelineOptions& options);

// The kernel images of `files` on this host's GPU (load_check.hpp): what is
// wrong with them, or a note for the stage's message (checked, or why not).
struct ImageCheck {
  std::vector<std::string> problems;
  std::string note;
};
ImageCheck check_kernel_images(const std::vector<std::filesystem::path>& files,
                               const PipelineOptions& options);

// launch_geometry of a bench that marks its cases in libkw_inject.so's
// records (a python bench): each case part of `result` gets the launches
// between its marks, held to its expected_launch and the bench's
// `launches`; a refused launch or incomplete records fail it.
void check_marked_launches(BenchResult& result, const BenchConfig& bench, const InjectedLaunches& observed);

// "NAME: the first problem; the next; ..." (at most five), for a failed check.
std::string problems_message(const std::string& bench_name, const std::vector<std::string>& problems);

// compute-sanitizer's tools (bench.sanitize_tools) over a bench whose
// correctness passed (over its correctness workload where it speaks kwbench,
// else its launch pass): any error fails `result`, quoting the first report.
void sanitize(BenchResult& result, const BenchAdapter& adapter, const BenchConfig& bench,
              const RepoConfig& config, const PipelineOptions& options);

// The first error block of compute-sanitizer's output, without its "========= " prefixes.
std::string first_sanitizer_report(const std::string& output);

}  // namespace kw::agent
