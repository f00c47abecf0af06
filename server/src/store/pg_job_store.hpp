// PgJobTransaction, PgJobStore: the job store in PostgreSQL (service/job_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "access.hpp"
#include "model/notifications.hpp"
#include "service/job_store.hpp"
#include "store/database.hpp"
#include "store/job_repository.hpp"
#include "store/pg_bisect_store.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

// A transaction of kw-server's database seen as the job queue's: a run
// store's transaction (PgRunTransaction::queue) and the profiles' reach the
// queue's rules through it.
class PgJobTransaction final : public JobTransaction {
 public:
  PgJobTransaction(pqxx::work& tx, const NotifierOptions& notifications)
      : tx_(tx), notifications_(notifications), bisects_(tx) {}

  std::int64_t existing_project_id(const std::string& name) override;
  std::string project_name(std::int64_t project_id) override;
  ProjectSettings project_settings(std::int64_t project_id) override;
  std::int64_t audited_cases(std::int64_t project_id, const std::string& gpu_model) override;
  std::pair<std::int64_t, bool> create(const NewJob& job) override;
  std::int64_t queued_shards_of_token(std::int64_t token_id) override;
  std::optional<nlohmann::json> get(std::int64_t job_id) override;
  std::optional<JobHold> lock(std::int64_t job_id) override;
  std::int64_t bind_agent(const std::string& name, const Caller& caller, const std::string& host,
                          const std::string& version, const nlohmann::json& gpus) override;
  void record_worker(std::int64_t agent_id, const std::optional<nlohmann::json>& gpu,
                     const std::optional<nlohmann::json>& health, bool can_profile) override;
  std::string agents_json(const std::optional<std::vector<std::string>>& projects) override;
  std::int64_t registered_agent(const std::string& name, const Caller& caller) override;
  std::optional<std::int64_t> claim(std::int64_t agent_id, const nlohmann::json& gpu_models,
                                    double lease_seconds,
                                    const std::optional<std::vector<std::string>>& projects,
                                    bool can_profile) override;
  ExpiredLeases requeue_expired() override;
  bool heartbeat(std::int64_t job_id, std::int64_t agent_id, double lease_seconds) override;
  bool release(std::int64_t job_id, std::int64_t agent_id) override;
  bool fail(std::int64_t job_id, std::int64_t agent_id, const std::string& reason) override;
  bool record_stage(std::int64_t job_id, std::int64_t agent_id, double lease_seconds,
                    const StageProgress& stage) override;
  bool fail_unmerged(std::int64_t job_id, const std::string& reason) override;
  void fail_shard_group(std::int64_t shard_job_id, const std::string& error) override;
  std::vector<std::int64_t> merge_pending() override;
  void complete(std::int64_t job_id) override;
  void store_shard_report(std::int64_t shard_job_id, const nlohmann::json& report) override;
  std::optional<nlohmann::json> shard_report(std::int64_t shard_job_id) override;
  ShardProgress shard_progress(std::int64_t job_id) override;
  BisectTransaction& bisects() override { return bisects_; }
  void job_queued(std::int64_t project_id, const nlohmann::json& job) override;
  void job_failed(std::int64_t job_id) override;
  void profile_ended(std::int64_t job_id) override;
  void bisect_ended(std::int64_t bisect_id) override;

 private:
  pqxx::work& tx_;
  const NotifierOptions& notifications_;
  PgBisectTransaction bisects_;
};

class PgJobStore final : public JobStore {
 public:
  PgJobStore(ConnectionPool& pool, const NotifierOptions& notifications)
      : pool_(pool), notifications_(notifications) {}

  // Retried whole on a serialization failure or a lost connection, as every
  // transaction of kw-server is (with_transaction).
  void transact(const std::function<void(JobTransaction&)>& work) override;

 private:
  ConnectionPool& pool_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
