// The run report: the one document the agent sends and the server stores
// (schema "kernelwatch.run/1", documented field by field in docs/run-report.md).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/detection.hpp"
#include "kw/common/shards.hpp"
#include "kw/common/stages.hpp"
#include "kw/common/validation_error.hpp"

namespace kw::common {

inline constexpr std::string_view kRunSchema = "kernelwatch.run/1";
inline constexpr std::size_t kMaxCases = 10000;  // per report
inline constexpr int kMaxJsonDepth = 64;         // nesting of any JSON body the server takes

// The stages and their order: stages.hpp.
enum class StageStatus { passed, failed, skipped };

std::string_view to_string(StageStatus status);
std::optional<StageStatus> stage_status_from(std::string_view text);

// A report that breaks the contract throws ValidationError.

struct AgentInfo {
  std::string name;
  std::string version;
  std::string host;  // may be empty
};

struct DeviceInfo {
  // "gpu", or "cpu" for a CPU benchmark on a host without a GPU (then
  // compute_capability and sm_count may be absent: "" and 0).
  std::string kind = "gpu";
  std::string name;  // "NVIDIA H100 80GB HBM3": the model baselines are keyed by
  std::string uuid;
  std::string compute_capability;  // "9.0"
  std::string driver;
  std::string cuda_runtime;
  std::int64_t memory_bytes = 0;
  std::int64_t sm_count = 0;
  std::int64_t l2_bytes = 0;
};

struct Stage {
  StageName name = StageName::build;
  StageStatus status = StageStatus::skipped;
  std::int64_t duration_ms = 0;  // wall time of the stage
  // GPU time of the stage: the bench processes' time on the GPU (absent in
  // reports of older agents; 0 for build).
  std::optional<double> gpu_seconds;
  std::string message;
  std::string log_tail;
  nlohmann::json details = nlohmann::json::object();
};

using Dim3 = std::array<std::int64_t, 3>;

// What a case declares it will launch; the launch_geometry stage compares the
// launches observed with CUPTI against it.
struct ExpectedLaunch {
  std::string kernel_pattern;  // glob over the demangled kernel name
  // Absent for a kernel whose block its autotuner picks (Triton): the name
  // and the other bounds are still held.
  std::optional<Dim3> block;
  std::optional<Dim3> grid;
  std::optional<std::int64_t> max_registers;
  std::optional<std::int64_t> max_shared_bytes;  // static + dynamic
};

struct Launch {
  std::string kernel;
  Dim3 grid{1, 1, 1};
  Dim3 block{1, 1, 1};
  std::int64_t registers = 0;
  std::int64_t static_smem = 0;
  std::int64_t dynamic_smem = 0;
  std::optional<double> duration_ns;
};

struct Correctness {
  bool passed = false;
  double rel_l2_err = 0;
  double max_abs_err = 0;
  double tolerance = 0;
  std::int64_t nonfinite = 0;
};

struct Measurement {
  std::string impl;                // "candidate" or "baseline:<name>"
  std::vector<double> samples_ns;  // raw, in the order they were taken
  double median_ns = 0;
  std::optional<double> flops;
  std::optional<double> bytes;
  std::optional<std::int64_t> peak_mem_bytes;
  std::vector<std::int64_t> throttled_samples;  // indices into samples_ns
  // The replicate each sample came from (0, 1, ...), one per sample; empty
  // in reports of older agents: the samples are then one replicate.
  std::vector<std::int64_t> replicates;
  // The SM clock (MHz) each sample ran at, one per sample, as the bench's
  // in-band probe saw it; empty when the bench does not report it.
  std::vector<double> sm_mhz;
  // Joules per iteration, one per replicate that measured energy, with that
  // replicate's index and average board power; all empty where none did.
  std::vector<double> energy_j;
  std::vector<std::int64_t> energy_replicates;
  std::vector<double> power_w;
  // How each replicate's samples make its location (detection.hpp).
  ReplicateLocation replicate_location = ReplicateLocation::trimmed_mean;

  bool is_candidate() const { return impl == "candidate"; }
};

// What detection reads of a measurement; it refers to the measurement's own vectors.
inline Timing timing_of(const Measurement& m) {
  return {m.samples_ns, m.throttled_samples, m.replicates, m.sm_mhz, m.replicate_location};
}

struct GpuState {
  std::vector<double> sm_mhz;  // before and after the case
  std::vector<double> mem_mhz;
  std::uint64_t throttle_reasons = 0;  // NVML clocks-event bit mask, OR over the case
  std::optional<double> temp_c_max;
  std::optional<double> power_w_max;
};

struct Case {
  std::string name;  // unique within a run; the key of the history series
  nlohmann::json params = nlohmann::json::object();
  std::optional<ExpectedLaunch> expected_launch;
  std::vector<Launch> launches;
  std::optional<Correctness> correctness;
  std::vector<Measurement> measurements;
  // base_commit's build measured in the same job, replicates alternating
  // with the head's (a pull request's A/B).
  std::vector<Measurement> base_measurements;
  // Set on a case the agent measured again after its first pass: replicates
  // below this index are the first pass, the rest the confirmation.
  std::optional<std::int64_t> first_pass_replicates;
  std::optional<GpuState> gpu_state;
  // What the case runs (docs/detection.md, "Fingerprints"):
  // {"digest": 64 hex, "parts": {...}}, or {"unknown": "why"}.
  std::optional<nlohmann::json> fingerprint;
  // A pull request's case whose fingerprint equals the base's: not timed.
  bool identical_to_base = false;
  // Identical to the base and timed anyway: the audit of skipping.
  bool audit = false;
  // A pull request's timed case whose fingerprint is not the base's: what
  // differs, and the base's side ({"differs": ["the code of kernel K", ...],
  // "base": {"digest": 64 hex} or {"unknown": "why"}}).
  std::optional<nlohmann::json> changed_from_base;

  const Measurement* candidate() const;
  const Measurement* base_candidate() const;
};

// A commit's kernelwatch.json `thresholds`: the smallest relative change
// flagged, for every case or for one.
struct Thresholds {
  std::optional<double> min_threshold;
  std::map<std::string, double> cases;

  // The case's own threshold, else min_threshold, else nullopt (the
  // project's setting applies).
  std::optional<double> for_case(const std::string& name) const;
};

// What git says of the commit measured: the tree ties together commits with
// the same content (a fast-forward, a rebase), the parents tie a merge commit
// to the pull request it merges.
struct CommitInfo {
  std::string tree;  // 40 lowercase hex
  std::vector<std::string> parents;
  std::string author;
  std::string subject;
  std::string committed_at;  // RFC 3339
};

// Who measured one shard of a run merged from its shards (shards.hpp).
struct ShardOrigin {
  std::int64_t index = 1;  // 1-based, as `kw run --shard 2/4` names it
  std::optional<std::int64_t> job_id;
  std::string agent;
  std::string host;
  std::string gpu_uuid;
  std::int64_t cases = 0;
  std::string started_at;
  std::string finished_at;
};

struct RunReport {
  std::string schema{kRunSchema};
  std::string project;
  std::string commit;  // 40 lowercase hex
  std::string branch;
  std::optional<std::string> base_commit;
  std::optional<std::int64_t> job_id;
  std::optional<CommitInfo> git;
  // kernelwatch.json `thresholds` as committed in `commit`, and in
  // `base_commit` (a pull request cannot loosen its own gate).
  std::optional<Thresholds> thresholds;
  std::optional<Thresholds> base_thresholds;
  AgentInfo agent;
  std::optional<DeviceInfo> device;  // absent when the host has no CUDA device
  std::string started_at;            // RFC 3339
  std::string finished_at;
  double gpu_seconds = 0;
  std::vector<Stage> stages;
  std::vector<Case> cases;
  // A shard's report: these cases are its part of the job's (`"shard":
  // {"index": 2, "count": 4}` in JSON, 1-based). A run merged from its
  // shards' reports names them in `shards` instead.
  std::optional<ShardSpec> shard;
  std::vector<ShardOrigin> shards;

  const Stage* stage(StageName name) const;
};

// Parses and validates; throws ValidationError naming the field.
RunReport parse_run_report(const nlohmann::json& document);
// Parses text first (a JSON syntax error is reported with its byte offset).
RunReport parse_run_report_text(std::string_view text);

// One stage as in a report's `stages` (an agent streams each as it ends,
// before the report); `path` names it in errors.
Stage parse_stage(const nlohmann::json& value, const std::string& path = "stage");

// `path` names the object in errors ("thresholds", "base_thresholds").
Thresholds parse_thresholds(const nlohmann::json& value, const std::string& path);

// The detection settings a project sets on the server (run_alpha and the
// thresholds), as a claimed job carries them to the agent, which screens and
// decides its A/B with them; the rest of DetectionSettings is the rule's.
nlohmann::json project_detection_json(const DetectionSettings& settings);
DetectionSettings parse_project_detection(const nlohmann::json& value, const std::string& path);

// A case's threshold and where it came from, for the comparison's record.
struct CaseThreshold {
  double value = 0;
  std::string source;
};

// Which threshold judges a case (docs/detection.md), the one place it is
// decided: the commit's kernelwatch.json where it sets one, else the
// project's (`project`, with its own source); for a pull request (`base`
// given) the stricter of that and its base's, so a pull request cannot
// loosen its own gate. The server judges by it, and the agent screens its
// A/B by it.
CaseThreshold case_threshold(const std::string& name, const CaseThreshold& project,
                             const std::optional<Thresholds>& own, const std::string& commit,
                             const std::optional<Thresholds>& base, const std::string& base_commit);

// The build stage's `details.kernels` (ptxas -v per kernel: {name,
// registers, shared_bytes, spill_stores, spill_loads}), which the server
// reads back to explain a regression. Throws ValidationError at `path`.
void check_build_details(const nlohmann::json& details, const std::string& path);

nlohmann::json to_json(const RunReport& report);
nlohmann::json to_json(const Thresholds& thresholds);
nlohmann::json to_json(const Case& run_case);
nlohmann::json to_json(const Stage& stage);
nlohmann::json to_json(const Launch& launch);

bool is_commit_sha(std::string_view text);
// Letters, digits, '-', '_' and '.': it names the project in URLs and in the
// store. Throws ValidationError at `path`.
void check_project_name(const std::string& name, const std::string& path);
// Seconds since the Unix epoch for an RFC 3339 timestamp, or nullopt.
std::optional<double> parse_rfc3339(std::string_view text);

}  // namespace kw::common
