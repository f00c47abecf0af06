// The job queue and the agents that work it. Claims use
// SELECT ... FOR UPDATE SKIP LOCKED so concurrent agents never get one job twice;
// a lease that is not renewed returns the job to the queue.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "access.hpp"
#include "store/database.hpp"

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

// Jobs whose lease ran out: back in the queue, or failed once their
// attempts are spent (the caller ends what waits on those).
struct ExpiredLeases {
  int requeued = 0;
  std::vector<std::int64_t> failed;
};

class JobRepository {
 public:
  static std::vector<Statement> statements();

  // Returns (id, created): an existing job for the same project, commit and
  // GPU class is returned as it is.
  static std::pair<std::int64_t, bool> create(pqxx::work& tx, const NewJob& job);
  static std::optional<nlohmann::json> get(pqxx::work& tx, std::int64_t job_id);

  // Registers or refreshes the caller's token's agent of this name (a
  // token's agent names are its own); returns the agent id.
  static std::int64_t bind_agent(pqxx::work& tx, const std::string& name, const Caller& caller,
                                 const std::string& host, const std::string& version,
                                 const nlohmann::json& gpus);
  // A worker's GPU ({"uuid", "index", "model"}), its last health check
  // (nullopt: none) and whether it can profile (has ncu), as its claim says.
  static void record_worker(pqxx::work& tx, std::int64_t agent_id, const std::optional<nlohmann::json>& gpu,
                            const std::optional<nlohmann::json>& health, bool can_profile);
  // GET /api/v1/agents: every agent, its GPU, health, state and running job
  // (of `projects` only; nullopt: all).
  static std::string agents_json(pqxx::work& tx, const std::optional<std::vector<std::string>>& projects);
  // The caller's token's agent of this name; 409 "agent_not_registered" otherwise.
  static std::int64_t registered_agent(pqxx::work& tx, const std::string& name, const Caller& caller);

  // Claims the oldest queued job this agent's GPUs can run, of `projects`
  // only (nullopt: any project); measurements before profiles, and
  // profiles only when it can run ncu.
  static std::optional<std::int64_t> claim(pqxx::work& tx, std::int64_t agent_id,
                                           const nlohmann::json& gpu_models, double lease_seconds,
                                           const std::optional<std::vector<std::string>>& projects,
                                           bool can_profile);
  // Expired leases: back to the queue, or failed after max_attempts.
  static ExpiredLeases requeue_expired(pqxx::work& tx);
  // Fails each sharded job whose pinned shards waited past
  // kPinnedShardWaitMinutes; adds it to `expired.failed`.
  static void fail_stranded_shards(pqxx::work& tx, ExpiredLeases& expired);
  // The shards still queued of the sharded jobs `token_id` queued.
  static std::int64_t queued_shards_of_token(pqxx::work& tx, std::int64_t token_id);
  static bool heartbeat(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id, double lease_seconds);
  static bool release(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id);
  // The holder could not run the job (no report can be made): it fails now,
  // with the reason, instead of after its lease expired max_attempts times.
  static bool fail(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id, const std::string& reason);
  // Records a stage of the job's current attempt (and renews the lease, as
  // a heartbeat does). False when this agent does not hold the job.
  static bool record_stage(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id, double lease_seconds,
                           const StageProgress& stage);
  static std::optional<JobHold> lock(pqxx::work& tx, std::int64_t job_id);
  static void complete(pqxx::work& tx, std::int64_t job_id);

  // A shard's report, kept until its job's run is made, and the shard done.
  static void store_shard_report(pqxx::work& tx, std::int64_t shard_job_id, const nlohmann::json& report);
  // The shard's report as stored (nullopt: none yet).
  static std::optional<nlohmann::json> shard_report(pqxx::work& tx, std::int64_t shard_job_id);
  // The sharded job (locked) and its shards' reports.
  static ShardProgress shard_progress(pqxx::work& tx, std::int64_t job_id);
  // A shard failed: its job fails, and so do the other shards not done, so
  // no agent measures for a run that cannot be made.
  static void fail_shard_group(pqxx::work& tx, std::int64_t shard_job_id, const std::string& reason);
  // A sharded job whose shards' reports do not merge fails with `reason`;
  // false when it was no longer running.
  static bool fail_unmerged(pqxx::work& tx, std::int64_t job_id, const std::string& reason);
  // The sharded jobs whose shards are all done but which have no run (the
  // server stopped between the last shard's report and the merge).
  static std::vector<std::int64_t> merge_pending(pqxx::work& tx);
  // Every job state (queued, running, done, failed), with how many jobs are in it.
  static std::map<std::string, std::int64_t> counts_by_state(pqxx::work& tx);
};

}  // namespace kw::server
