// Turns other harnesses' output into run-report cases with measurements:
// Google Benchmark JSON (each repetition's real/manual time is a sample) and
// NVBench JSON written with --jsonbin (per-sample cold GPU times, or CPU
// times of cpu_only benchmarks, and SM clocks, from its binary sidecars; the
// summary's mean as one sample when a sidecar is missing, said in "notes").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "repo_config.hpp"

namespace kw::agent {

// What the pipeline needs to run a bench of another harness in full_bench:
// one implementation per format, so the pipeline never asks which it is.
class BenchAdapter {
 public:
  virtual ~BenchAdapter() = default;
  virtual std::string harness() const = 0;  // for messages: "Google Benchmark"
  // Command-line arguments that make the bench write its JSON to `out`.
  virtual std::vector<std::string> output_args(const std::filesystem::path& out) const = 0;
  // {"cases", "device"?, "notes"?} from the JSON written to `out`.
  virtual nlohmann::json adapt(const nlohmann::json& document, const std::filesystem::path& out,
                               const std::string& prefix) const = 0;
  // Whether its benches can run on a host without a GPU (CPU benchmarks).
  virtual bool runs_without_gpu() const = 0;
  // Arguments of the shortest run that still launches every kernel: the
  // launch_geometry pass.
  virtual std::vector<std::string> one_pass_args() const = 0;
  // Arguments that list the benchmarks and exit, touching no kernel: the
  // load stage's run under LD_BIND_NOW.
  virtual std::vector<std::string> list_args() const = 0;
  // Files the bench wrote beside `out`.
  virtual void remove_outputs(const std::filesystem::path& out) const;
};

// nullptr for kwbench and python, which the pipeline runs stage by stage itself.
const BenchAdapter* adapter_for(BenchFormat format);

// Both return {"cases": [...]} ready to merge into a report, and throw
// std::runtime_error naming what is wrong with the input. adapt_nvbench adds
// "device" (from NVBench's devices section) and "notes" (what was left out or
// approximated, for the stage's message).
nlohmann::json adapt_gbench(const nlohmann::json& output, const std::string& prefix);
nlohmann::json adapt_nvbench(const nlohmann::json& output, const std::filesystem::path& json_file,
                             const std::string& prefix);

}  // namespace kw::agent
