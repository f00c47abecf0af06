// What JobService reads and writes: the job queue, its agents, and the
// notices a job's queueing or failure leaves, one transaction at a time.
// kw-server keeps them in PostgreSQL (PgJobStore, over JobRepository); the
// queue's rules are tested on an in-memory stand-in
// (server/tests/in_memory_store.hpp), and both pass one contract
// (server/tests/job_store_contract.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "model/jobs.hpp"
#include "model/settings.hpp"
#include "service/bisect_store.hpp"

namespace kw::server {

// One transaction: what it wrote is kept when the work given to
// JobStore::transact returns, and none of it when the work throws.
class JobTransaction {
 public:
  virtual ~JobTransaction() = default;

  // The project's id; NotFound ("no_such_project") when there is none.
  virtual std::int64_t existing_project_id(const std::string& name) = 0;
  virtual std::string project_name(std::int64_t project_id) = 0;
  virtual ProjectSettings project_settings(std::int64_t project_id) = 0;

  // As JobRepository's functions of the same names.
  virtual std::pair<std::int64_t, bool> create(const NewJob& job) = 0;
  virtual std::int64_t queued_shards_of_token(std::int64_t token_id) = 0;
  // The project's cases identical to their base and timed anyway (the audit
  // of skipping) on this GPU model, over its stored runs.
  virtual std::int64_t audited_cases(std::int64_t project_id, const std::string& gpu_model) = 0;
  virtual std::optional<nlohmann::json> get(std::int64_t job_id) = 0;
  virtual std::optional<JobHold> lock(std::int64_t job_id) = 0;
  virtual std::int64_t bind_agent(const std::string& name, const Caller& caller, const std::string& host,
                                  const std::string& version, const nlohmann::json& gpus) = 0;
  virtual void record_worker(std::int64_t agent_id, const std::optional<nlohmann::json>& gpu,
                             const std::optional<nlohmann::json>& health, bool can_profile) = 0;
  virtual std::string agents_json(const std::optional<std::vector<std::string>>& projects) = 0;
  virtual std::int64_t registered_agent(const std::string& name, const Caller& caller) = 0;
  virtual std::optional<std::int64_t> claim(std::int64_t agent_id, const nlohmann::json& gpu_models,
                                            double lease_seconds,
                                            const std::optional<std::vector<std::string>>& projects,
                                            bool can_profile) = 0;
  virtual ExpiredLeases requeue_expired() = 0;
  virtual bool heartbeat(std::int64_t job_id, std::int64_t agent_id, double lease_seconds) = 0;
  virtual bool release(std::int64_t job_id, std::int64_t agent_id) = 0;
  virtual bool fail(std::int64_t job_id, std::int64_t agent_id, const std::string& reason) = 0;
  virtual bool record_stage(std::int64_t job_id, std::int64_t agent_id, double lease_seconds,
                            const StageProgress& stage) = 0;
  virtual bool fail_unmerged(std::int64_t job_id, const std::string& reason) = 0;
  // The shard's job and the job's other shards not yet ended fail with `error`.
  virtual void fail_shard_group(std::int64_t shard_job_id, const std::string& error) = 0;
  virtual std::vector<std::int64_t> merge_pending() = 0;
  // A job's report is in: its job is done.
  virtual void complete(std::int64_t job_id) = 0;
  // A shard's report, kept (and the shard done) until its job's run is
  // made; as stored (nullopt: none yet); and where its job stands.
  virtual void store_shard_report(std::int64_t shard_job_id, const nlohmann::json& report) = 0;
  virtual std::optional<nlohmann::json> shard_report(std::int64_t shard_job_id) = 0;
  virtual ShardProgress shard_progress(std::int64_t job_id) = 0;

  // The bisects, in this transaction: a judged run or a failed step moves them.
  virtual BisectTransaction& bisects() = 0;

  // The notices, kept with the transaction (the notification outbox), for
  // whoever watches the project: a job queued; a job that ended without a
  // run (an error status on its commit); a profile job that ended; a bisect
  // that ended.
  virtual void job_queued(std::int64_t project_id, const nlohmann::json& job) = 0;
  virtual void job_failed(std::int64_t job_id) = 0;
  virtual void profile_ended(std::int64_t job_id) = 0;
  virtual void bisect_ended(std::int64_t bisect_id) = 0;
};

class JobStore {
 public:
  using Transaction = JobTransaction;
  virtual ~JobStore() = default;
  virtual void transact(const std::function<void(JobTransaction&)>& work) = 0;
};

// `work(Store::Transaction&)` in one transaction of `store` (a JobStore or
// a RunStore), and what it returned.
template <typename Store, typename Work>
auto in_transaction(Store& store, Work&& work) {
  using Transaction = typename Store::Transaction;
  using Result = std::invoke_result_t<Work&, Transaction&>;
  if constexpr (std::is_void_v<Result>) {
    store.transact(work);
  } else {
    std::optional<Result> result;
    store.transact([&](Transaction& tx) { result.emplace(work(tx)); });
    return std::move(*result);
  }
}

}  // namespace kw::server
