// full_bench for every bench format (docs/detection.md): each replicate runs
// the bench once, in a fresh process, over the selected cases in an order
// shuffled per replicate, and a case's replicates are its passes. With a base
// checkout the base's replicates alternate with the head's (ABBA...) in the
// same job. The number of replicates adapts to the spread seen between them
// within the stage's GPU-seconds budget, cases the first pass screens as
// changed are measured again before the report goes out, and per-sample
// clocks and throttle marks are kept wherever the harness gives them. The
// format is the adapter's business (adapters.hpp): the engine never asks
// which it is.
//
// A pull request's case whose fingerprint (fingerprint.hpp) equals the
// base's is not timed: it is reported identical to the base, but for the
// audited share of those, which are timed like the changed ones.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/adapters.hpp"
#include "pipeline/bench_result.hpp"
#include "pipeline/fingerprint.hpp"
#include "pipeline/prepared_passes.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

struct EngineOptions {
  std::filesystem::path checkout;
  std::optional<std::filesystem::path> base_checkout;  // A/B when set
  std::optional<common::Thresholds> base_thresholds;
  // The project's threshold settings on the server (a claimed job carries
  // them): what a case without one in kernelwatch.json is judged with.
  std::optional<common::Thresholds> project_thresholds;
  common::DetectionSettings detection;  // the project's, which the server judges by
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
  std::uint64_t seed = 0;  // of the case orders; 0: from the clock
  // Measure these of the bench's cases alone (a bisect step's flagged
  // cases); empty: every case.
  std::vector<std::string> only_cases;
  // Measure this shard of the cases alone (kw/common/shards.hpp): of the
  // cases listed, or of the groups of a harness that names its cases only
  // as it runs them.
  std::optional<common::ShardSpec> shard;
  // A/B with full_bench.skip_identical: a side's fingerprints from a launch
  // pass in that checkout. The head's come from its preflight where it ran
  // one (head_fingerprints).
  std::function<FingerprintSet(const std::filesystem::path& checkout)> fingerprint;
  std::optional<FingerprintSet> head_fingerprints;
  // What the pipeline's comparison with the base took before full_bench
  // (pipeline.cpp): the cases it listed, the base's fingerprints, and the
  // identical cases of this bench the job's audit drew (empty: none). Unset,
  // the engine takes each itself and draws its own audit.
  std::optional<CaseListing> listing;
  std::optional<FingerprintSet> base_fingerprints;
  std::optional<std::set<std::string>> audit_cases;
  // Of the audit's draw where the engine draws it (audit_seed).
  std::uint64_t audit_seed = 0;
  // Python replicate processes the pipeline started (importing while the
  // preflight's quick_bench ran); else the engine starts its own.
  std::shared_ptr<PreparedPasses> prepared;
};

// How many of a job's `identical` cases its audit times: full_bench's
// audit_share of them, at least one; none with a share of 0.
std::size_t audit_count(std::size_t identical, double share);

// The share of its identical cases a job audits: the project's
// (full_bench.audit_share), raised to the share the server asks while the
// project has audited few cases on the GPU model (a claimed job's "audit":
// {"share", ...}, share null once it has enough); an audit turned off (0)
// stays off.
double job_audit_share(double configured, const nlohmann::json& asked);

// What a job's audit is drawn with: its job id, else (a run without a
// queue) the commits it compares, so the same job draws the same cases
// however often it runs, and an audit can be reproduced.
std::uint64_t audit_seed(std::optional<std::int64_t> job_id, const std::string& commit,
                         const std::optional<std::string>& base_commit);

BenchResult run_full_bench(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
                           const EngineOptions& options);

// One pass's case merged into the accumulated one as replicate `replicate`
// (exposed for tests): samples appended, throttled indices and replicate
// indices shifted accordingly, medians recomputed.
void merge_replicate(nlohmann::json& accumulated, const nlohmann::json& pass_case, std::int64_t replicate,
                     const char* measurements_key);

}  // namespace kw::agent
