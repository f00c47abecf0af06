// full_bench as replicates (docs/detection.md): each pass runs the bench once
// over the selected cases (one process, fresh allocations and warm-up per
// case, the case order shuffled per pass), and a case's replicates are its
// passes. With a base checkout the base's passes alternate with the head's
// (ABBA...) in the same job. The number of replicates adapts to the spread
// seen between them within the stage's GPU-seconds budget, and cases the
// first pass screens as changed are measured again before the report goes out.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_result.hpp"
#include "repo_config.hpp"

namespace kw::agent {

struct ReplicateOptions {
  std::filesystem::path checkout;
  std::optional<std::filesystem::path> base_checkout;  // A/B when set
  std::optional<common::Thresholds> base_thresholds;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
  std::uint64_t seed = 0;  // of the case orders; 0: from the clock
  // Measure these of the bench's cases alone (a bisect step's flagged
  // cases); empty: every case.
  std::vector<std::string> only_cases;
};

BenchResult run_replicated_full_bench(const BenchConfig& bench, const RepoConfig& config,
                                      const ReplicateOptions& options);

// One bench pass's cases merged into the accumulated ones as replicate
// `replicate` (exposed for tests): samples appended, throttled indices and
// replicate indices shifted accordingly, medians recomputed.
void merge_replicate(nlohmann::json& accumulated, const nlohmann::json& pass_case, std::int64_t replicate,
                     const char* measurements_key);

}  // namespace kw::agent
