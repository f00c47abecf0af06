// The job queue's facts as the services see them: a job to queue, one held,
// a stage streamed, a sharded job's progress, leases run out, and what a
// judged run did to a bisect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kw::server {

struct NewJob {
  std::int64_t project_id = 0;
  std::string commit;
  std::string branch;
  std::optional<std::string> base_commit;
  std::optional<std::int64_t> pr;
  std::string gpu_class = "any";
  int max_attempts = 3;
  // Measure again though the commit has a job on its side (the default
  // branch or not) and GPU class; otherwise that job is returned.
  bool rerun = false;
  // A push to the default branch: the last measured commit before it, then
  // the pushed commits oldest first (the last is `commit`). A regression
  // found there is bisected over them.
  std::vector<std::string> range;
  std::optional<std::int64_t> bisect_id;  // a step of that bisect
  // Split over this many GPUs (kw/common/shards.hpp): the job gets the run,
  // its shards (jobs of kind 'shard') are what agents claim.
  int shards = 1;
  std::optional<std::int64_t> token_id;  // the token that queued it
};

// Shards pinned to one GPU model that no agent of that model claims within
// this fail their job, naming the model: kw submit --wait then ends.
inline constexpr int kPinnedShardWaitMinutes = 30;
// Shards one token may have queued at once, over all its sharded jobs.
inline constexpr std::int64_t kMaxQueuedShardsPerToken = 256;

// One stage as an agent streams it: `status` is "started" or a report
// stage's status; the numbers are absent while it runs.
struct StageProgress {
  std::string name;
  int ordinal = 0;
  std::string status;
  std::optional<std::int64_t> duration_ms;
  std::optional<double> gpu_seconds;
  std::string message;
  std::string log_tail;
};

struct JobHold {
  std::int64_t job_id = 0;
  std::int64_t project_id = 0;
  std::string commit;
  std::string state;
  std::string kind;  // measure, profile or shard
  std::optional<std::int64_t> agent_id;
  // A shard's: the job it is part of, and which part (1-based) of how many.
  std::optional<std::int64_t> parent_job_id;
  std::int64_t shard_index = 0;
  std::int64_t shards = 1;  // a shard's parent's; a job's own
};

// Where a sharded job stands once one of its shards' reports is in.
struct ShardProgress {
  std::string state;                      // the job's: running, done or failed
  std::string error;                      // why it failed
  std::vector<std::int64_t> waiting_for;  // the shards (1-based) whose reports are not in
  // Every shard's report as JSON text, when none is waited for: parsed by
  // the merge once it has the memory for them.
  std::vector<std::string> reports;
};

// A shard the store failed, and why: the job service fails its job and the
// job's other shards with it.
struct FailedShard {
  std::int64_t shard_job_id = 0;
  std::string reason;
};

// Jobs whose lease ran out: back in the queue, or failed once their
// attempts are spent (the caller ends what waits on those).
struct ExpiredLeases {
  int requeued = 0;
  // Jobs failed; for a shard, its job, once the job service has failed it.
  std::vector<std::int64_t> failed;
  // Shards failed: their lease ran out on every attempt, or, pinned to a GPU
  // model, they waited past kPinnedShardWaitMinutes for an agent with it.
  std::vector<FailedShard> failed_shards;
};

// What a judged run did to bisects.
struct BisectAfterRun {
  bool step = false;                     // the run was a bisect's step
  std::optional<std::int64_t> finished;  // a bisect that ended with it (found or failed)
};

}  // namespace kw::server
