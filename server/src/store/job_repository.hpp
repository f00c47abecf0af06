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
#include "model/jobs.hpp"
#include "store/database.hpp"

namespace kw::server {

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
  // Fails the first pinned shard of each sharded job whose pinned shards
  // waited past kPinnedShardWaitMinutes; adds it to `expired.failed_shards`.
  static void fail_stranded_shards(pqxx::work& tx, ExpiredLeases& expired);
  // The shards still queued of the sharded jobs `token_id` queued.
  static std::int64_t queued_shards_of_token(pqxx::work& tx, std::int64_t token_id);
  static std::int64_t audited_cases(pqxx::work& tx, std::int64_t project_id, const std::string& gpu_model);
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
  // The shard's job and its other shards not yet ended fail with `error`.
  static void fail_shard_group(pqxx::work& tx, std::int64_t shard_job_id, const std::string& error);
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
