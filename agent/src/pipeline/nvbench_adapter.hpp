// NVIDIA NVBench benches of any version since 2022. Projects pin NVBench
// (through CPM or rapids-cmake) and its options came over the years:
// --profile in 2022-04, --stopping-criterion in 2023-11, --no-batch in
// 2026-02. Each executable is asked once what it accepts, by its `--list`
// run behind the options kernelwatch would pass (NVBench parses its
// arguments in order and names the first it does not know before --list
// exits), and gets only those; what it lacked and what that costs is said in
// the stage's notes.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/adapters.hpp"

namespace kw::agent {

// What one NVBench executable accepts of the options kernelwatch passes.
struct NvbenchSupport {
  bool no_batch = true;            // else each state's batched measurement runs too, unread
  bool stopping_criterion = true;  // else stdrel, NVBench's one criterion then, is implied
  bool profile = true;             // else the launch pass runs --run-once
};

const BenchAdapter& nvbench_adapter();

// NVBench's JSON (written with --jsonbin) as {"cases": [...]} ready to merge
// into a report, with "device" (from its devices section), "notes" (what was
// left out or approximated, skipped states by name) and, where NVBench ran
// its batched measurement, "batch_seconds" and "cold_seconds" (its walltime
// summaries, summed). Throws std::runtime_error naming what is wrong with
// the input.
nlohmann::json adapt_nvbench(const nlohmann::json& output, const std::filesystem::path& json_file,
                             const std::string& prefix);

// The argument list that runs these NVBench benchmarks in this order, with
// kernelwatch's stopping criterion and per-state budget unless the bench's
// own arguments set them, using only what `support` says the bench accepts.
std::vector<std::string> nvbench_pass_args(const BenchConfig& bench, const FullBenchConfig& full_bench,
                                           const std::vector<std::string>& benchmarks,
                                           const NvbenchSupport& support = {});
// `--list` output: the benchmark names.
std::vector<std::string> nvbench_benchmarks_of_list(const std::string& listing);
// The argument an NVBench run refused ("Unrecognized command-line argument:
// `--no-batch`."), empty when its output names none.
std::string nvbench_refused_argument(const std::string& output);
// What a bench lacking some of those options costs, one note each.
std::vector<std::string> nvbench_support_notes(const NvbenchSupport& support);

}  // namespace kw::agent
