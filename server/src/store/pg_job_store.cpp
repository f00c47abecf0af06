#include "store/pg_job_store.hpp"

#include "store/notification_repository.hpp"

#include "store/run_repository.hpp"

namespace kw::server {

std::int64_t PgJobTransaction::existing_project_id(const std::string& name) {
  return RunRepository::existing_project_id(tx_, name);
}

std::string PgJobTransaction::project_name(std::int64_t project_id) {
  return RunRepository::project_name(tx_, project_id);
}

ProjectSettings PgJobTransaction::project_settings(std::int64_t project_id) {
  return SettingsRepository::get(tx_, project_id);
}

std::int64_t PgJobTransaction::audited_cases(std::int64_t project_id, const std::string& gpu_model) {
  return JobRepository::audited_cases(tx_, project_id, gpu_model);
}

std::pair<std::int64_t, bool> PgJobTransaction::create(const NewJob& job) {
  return JobRepository::create(tx_, job);
}

std::int64_t PgJobTransaction::queued_shards_of_token(std::int64_t token_id) {
  return JobRepository::queued_shards_of_token(tx_, token_id);
}

std::optional<nlohmann::json> PgJobTransaction::get(std::int64_t job_id) {
  return JobRepository::get(tx_, job_id);
}

std::optional<JobHold> PgJobTransaction::lock(std::int64_t job_id) {
  return JobRepository::lock(tx_, job_id);
}

std::int64_t PgJobTransaction::bind_agent(const std::string& name, const Caller& caller,
                                          const std::string& host, const std::string& version,
                                          const nlohmann::json& gpus) {
  return JobRepository::bind_agent(tx_, name, caller, host, version, gpus);
}

void PgJobTransaction::record_worker(std::int64_t agent_id, const std::optional<nlohmann::json>& gpu,
                                     const std::optional<nlohmann::json>& health, bool can_profile) {
  JobRepository::record_worker(tx_, agent_id, gpu, health, can_profile);
}

std::string PgJobTransaction::agents_json(const std::optional<std::vector<std::string>>& projects) {
  return JobRepository::agents_json(tx_, projects);
}

std::int64_t PgJobTransaction::registered_agent(const std::string& name, const Caller& caller) {
  return JobRepository::registered_agent(tx_, name, caller);
}

std::optional<std::int64_t> PgJobTransaction::claim(std::int64_t agent_id, const nlohmann::json& gpu_models,
                                                    double lease_seconds,
                                                    const std::optional<std::vector<std::string>>& projects,
                                                    bool can_profile) {
  return JobRepository::claim(tx_, agent_id, gpu_models, lease_seconds, projects, can_profile);
}

ExpiredLeases PgJobTransaction::requeue_expired() {
  return JobRepository::requeue_expired(tx_);
}

bool PgJobTransaction::heartbeat(std::int64_t job_id, std::int64_t agent_id, double lease_seconds) {
  return JobRepository::heartbeat(tx_, job_id, agent_id, lease_seconds);
}

bool PgJobTransaction::release(std::int64_t job_id, std::int64_t agent_id) {
  return JobRepository::release(tx_, job_id, agent_id);
}

bool PgJobTransaction::fail(std::int64_t job_id, std::int64_t agent_id, const std::string& reason) {
  return JobRepository::fail(tx_, job_id, agent_id, reason);
}

bool PgJobTransaction::record_stage(std::int64_t job_id, std::int64_t agent_id, double lease_seconds,
                                    const StageProgress& stage) {
  return JobRepository::record_stage(tx_, job_id, agent_id, lease_seconds, stage);
}

bool PgJobTransaction::fail_unmerged(std::int64_t job_id, const std::string& reason) {
  return JobRepository::fail_unmerged(tx_, job_id, reason);
}

void PgJobTransaction::fail_shard_group(std::int64_t shard_job_id, const std::string& error) {
  JobRepository::fail_shard_group(tx_, shard_job_id, error);
}

std::vector<std::int64_t> PgJobTransaction::merge_pending() {
  return JobRepository::merge_pending(tx_);
}

void PgJobTransaction::complete(std::int64_t job_id) {
  JobRepository::complete(tx_, job_id);
}

void PgJobTransaction::store_shard_report(std::int64_t shard_job_id, const nlohmann::json& report) {
  JobRepository::store_shard_report(tx_, shard_job_id, report);
}

std::optional<nlohmann::json> PgJobTransaction::shard_report(std::int64_t shard_job_id) {
  return JobRepository::shard_report(tx_, shard_job_id);
}

ShardProgress PgJobTransaction::shard_progress(std::int64_t job_id) {
  return JobRepository::shard_progress(tx_, job_id);
}

void PgJobTransaction::job_queued(std::int64_t project_id, const nlohmann::json& job) {
  NotificationRepository::job_queued(tx_, notifications_, project_id, job);
}

void PgJobTransaction::job_failed(std::int64_t job_id) {
  NotificationRepository::job_failed(tx_, notifications_, job_id);
}

void PgJobTransaction::profile_ended(std::int64_t job_id) {
  NotificationRepository::profile_ended(tx_, notifications_, job_id);
}

void PgJobTransaction::bisect_ended(std::int64_t bisect_id) {
  NotificationRepository::bisect_ended(tx_, notifications_, bisect_id);
}

void PgJobStore::transact(const std::function<void(JobTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgJobTransaction jobs(tx, notifications_);
    work(jobs);
  });
}

}  // namespace kw::server
