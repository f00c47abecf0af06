// What one run of the pipeline is given: the checkout and its commit, the
// base for a pull request's A/B, which stages, and where its progress goes.
// Read by the pipeline and by the bench checks it calls.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"
#include "kw/common/shards.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

struct PipelineOptions {
  std::filesystem::path checkout;
  std::string commit;
  std::string branch;
  std::optional<std::string> base_commit;
  // base_commit's built checkout: full_bench then measures base and head
  // alternately in this run (A/B). Without it the server compares with the
  // stored history.
  std::optional<std::filesystem::path> base_checkout;
  // base_commit's kernelwatch.json thresholds: run_pipeline reads them from
  // git; the screening for a second A/B pass uses the stricter side's.
  std::optional<common::Thresholds> base_thresholds;
  // The project's threshold settings on the server, as a claimed job
  // carries them; nullopt: the detection's default.
  std::optional<common::Thresholds> project_thresholds;
  // The project's detection settings (run_alpha, thresholds) as a claimed
  // job carries them; the rule's defaults for a run without a server.
  common::DetectionSettings detection;
  std::optional<std::int64_t> job_id;
  std::string agent_name;
  std::string agent_host;
  // Stages after build to run; empty: all. The others are reported skipped
  // (a re-measurement of a commit whose preflight already passed).
  std::vector<common::StageName> only_stages;
  // The cases full_bench measures (of a kwbench or python bench; a bisect
  // step's flagged cases); empty: all. The preflight runs every case.
  std::vector<std::string> only_cases;
  // This run measures one shard of its job's cases (kw/common/shards.hpp):
  // the preflight of a bench that speaks kwbench's command line and every
  // bench's full_bench take that shard's cases alone, and the report says
  // which shard it is.
  std::optional<common::ShardSpec> shard;
  // Set by run_pipeline once the build passed: each kwbench or python
  // bench's cases of this shard, by bench name.
  std::map<std::string, std::vector<std::string>> shard_cases;
  // No GPU: the GPU stages are skipped with "no CUDA device", never run.
  bool gpu_available = false;
  // The compiler cache's directory (build through ccache where installed);
  // empty: no compiler cache.
  std::filesystem::path ccache_dir;
  // Where kwbench keeps correctness references across runs
  // (KWBENCH_REFERENCE_CACHE, unless the environment sets it); empty: its default.
  std::filesystem::path reference_cache_dir;
  // Where a base commit's fingerprints are kept, by commit, bench and GPU,
  // for the next pull request on the same base; empty: none kept.
  std::filesystem::path fingerprint_cache_dir;
  // The commit whose build outputs `checkout` already holds: empty for a
  // fresh checkout, else the build is incremental.
  std::string built_from;
  // When the build stage began (run_pipeline sets it): a bench file or a
  // python bench's extension written before it, under a build definition
  // changed since, fails load as another commit's (pipeline/stale_outputs.hpp).
  std::optional<std::filesystem::file_time_type> build_started;
  // Set only for a build tree that is the agent's own (never a user's
  // checkout): removes every untracked and ignored file in it. The build
  // stage then builds from scratch when kernelwatch.json says build.clean,
  // and retries an incremental build that failed from scratch before it
  // counts as a build failure.
  std::function<void()> clean_build_tree;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
  // Each stage as it starts ({"started": NAME}) and as it ends (the stage as
  // the report will hold it): `kw agent` streams them to the server.
  std::function<void(const nlohmann::json&)> on_stage;
};

}  // namespace kw::agent
