// The job queue's rules: who may queue, claim and hold a job, and what a
// job's end announces. Handlers parse a request and make one call here; the
// transactions are opened here, never in a handler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "model/notifications.hpp"
#include "service/job_store.hpp"

namespace kw::server {

// Failing a job and announcing it meet only in job_service.cpp, whoever
// fails it: its holder (fail_job), an expired lease (requeue_expired: the
// reaper's pass or a claim's), or shards whose reports do not make one run
// (fail_unmerged_job, for IngestService). A shard that fails fails its job
// and the job's other shards with it; the job is what is announced.
bool fail_job(JobTransaction& tx, std::int64_t job_id, std::int64_t agent_id, const std::string& reason);
ExpiredLeases requeue_expired(JobTransaction& tx);
bool fail_unmerged_job(JobTransaction& tx, std::int64_t job_id, const std::string& reason);

// What an agent says of itself when it asks for work.
struct ClaimRequest {
  std::string agent;
  std::string host;
  std::string version;
  nlohmann::json gpus = nlohmann::json::array();  // the GPU models it has
  // The projects it serves (those it can fetch); nullopt: every project its
  // token names. Only those its token names are claimed from.
  std::optional<std::vector<std::string>> serves;
  std::optional<nlohmann::json> gpu;     // {uuid, index, model}: the one GPU a worker is pinned to
  std::optional<nlohmann::json> health;  // {healthy, checks}: its last health check
  bool can_profile = false;              // it runs Nsight Compute (ncu) and takes profile jobs
};

struct QueueSettings {
  double lease_seconds = 120;
  int max_attempts = 3;
};

class JobService {
 public:
  JobService(JobStore& store, QueueSettings settings) : store_(store), settings_(settings) {}

  const QueueSettings& settings() const { return settings_; }

  // {created, job}: an equal job already queued is answered, not made again.
  std::pair<bool, nlohmann::json> create(const Caller& caller, const std::string& project, NewJob job);
  nlohmann::json get(const Caller* caller, std::int64_t job_id);
  // Every agent, its GPU, health and job; jobs of projects the caller cannot read are left out.
  std::string agents(const Caller* caller);
  // The job given to the agent, with `project_thresholds` (what its cases are
  // judged by where kernelwatch.json sets none) and `lease_seconds`; nullopt:
  // none for it, or its GPU failed its health check.
  std::optional<nlohmann::json> claim(const Caller& caller, const ClaimRequest& ask);

  // What the agent holding a running job does to it; each answers the job.
  // Conflict ("job_not_held") when `agent` does not hold it.
  nlohmann::json heartbeat(const Caller& caller, std::int64_t job_id, const std::string& agent);
  nlohmann::json release(const Caller& caller, std::int64_t job_id, const std::string& agent);
  nlohmann::json record_stage(const Caller& caller, std::int64_t job_id, const std::string& agent,
                              const StageProgress& progress);
  nlohmann::json fail(const Caller& caller, std::int64_t job_id, const std::string& agent,
                      const std::string& reason);

  // The lease reaper's pass: expired leases back in the queue, jobs out of attempts failed.
  ExpiredLeases reap();
  // Sharded jobs whose every report is in but whose run was not made.
  std::vector<std::int64_t> unmerged_shard_jobs();

 private:
  template <typename Action>
  nlohmann::json as_holder(const Caller& caller, std::int64_t job_id, const std::string& agent,
                           const char* verb, Action&& action);

  JobStore& store_;
  QueueSettings settings_;
};

}  // namespace kw::server
