// The stages a bench runs, each for one case in this process (the CLI runs
// the cases in a child process and starts a fresh one after a faulting case).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/stages.hpp"
#include "kwbench/kwbench.hpp"

namespace kwbench {

struct BenchOptions {
  std::uint64_t seed = 20261121;
  double noise_target = 0.005;  // full_bench stops when every implementation's relative noise is under this
  double max_seconds = 5;       // full_bench time cap per case
  int min_samples = 10;
  int max_samples = 1000;
  int quick_iterations = 10;
  int warmup_rounds = 5;             // full_bench: interleaved rounds before timing, at least
  double warmup_min_seconds = 0.02;  // and at least this long; then until the GPU settles
  double warmup_seconds = 0.1;       // or this long at the most
  std::string impls = "*";           // full_bench: glob over the implementations timed
  unsigned order_offset = 0;         // full_bench: which implementation goes first in round 0
  // full_bench: after the timed rounds, each implementation runs back to back
  // this long between two reads of NVML's energy counter (0: no energy).
  double energy_seconds = 0;
};

struct DeviceFacts {
  int ordinal = 0;
  std::string pci_bus_id;
  std::int64_t l2_bytes = 0;
  nlohmann::json report;  // the run report's "device" object
};

struct CaseOutcome {
  std::string status = "passed";  // passed | failed | skipped
  std::string message;
  nlohmann::json part = nlohmann::json::object();  // the case's part of the run report
  nlohmann::json details = nlohmann::json::object();
};

DeviceFacts probe_device();  // throws kwbench::Error when there is no usable device

CaseOutcome run_launch_geometry(Case& c, const DeviceFacts& device, const BenchOptions& options);
CaseOutcome run_correctness(Case& c, const DeviceFacts& device, const BenchOptions& options);
CaseOutcome run_quick_bench(Case& c, const DeviceFacts& device, const BenchOptions& options);
CaseOutcome run_full_bench(Case& c, const DeviceFacts& device, const BenchOptions& options);

// The per-case stages of the preflight, in order: the preflight's stages
// (kw/common/stages.hpp) but load, which the whole bench passes at once.
inline const std::vector<std::string> kPreflightCaseStages = [] {
  std::vector<std::string> stages;
  for (kw::common::StageName stage : kw::common::preflight_stages()) {
    if (stage != kw::common::StageName::load) stages.emplace_back(kw::common::to_string(stage));
  }
  return stages;
}();

// The first `stages` of kPreflightCaseStages for one case on one setup of
// it: on_start(i) as stage i starts, on_result(i, outcome) as it ends. A
// failed stage ends the case (the stages after it are skipped).
void run_preflight(Case& c, const BenchOptions& options, std::size_t stages,
                   const std::function<void(std::size_t)>& on_start,
                   const std::function<void(std::size_t, const CaseOutcome&)>& on_result);

// The load stage is not per case: libraries, symbols and kernels of the registry.
CaseOutcome run_load(const std::vector<LibraryInfo>& libraries, const DeviceFacts& device);

nlohmann::json expected_launch_json(const ExpectedLaunch& expected);

}  // namespace kwbench
