#include "service/job_service.hpp"

#include <algorithm>

#include "errors.hpp"
#include "service/ownership.hpp"
#include "store/bisect_repository.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

using nlohmann::json;

bool fail_job(pqxx::work& tx, const NotifierOptions& notifications, std::int64_t job_id,
              std::int64_t agent_id, const std::string& reason) {
  if (!JobRepository::fail(tx, job_id, agent_id, reason)) return false;
  NotificationRepository::job_failed(tx, notifications, job_id);
  return true;
}

ExpiredLeases requeue_expired(pqxx::work& tx, const NotifierOptions& notifications) {
  ExpiredLeases leases = JobRepository::requeue_expired(tx);
  for (std::int64_t failed : leases.failed) NotificationRepository::job_failed(tx, notifications, failed);
  return leases;
}

bool fail_unmerged_job(pqxx::work& tx, const NotifierOptions& notifications, std::int64_t job_id,
                       const std::string& reason) {
  if (!JobRepository::fail_unmerged(tx, job_id, reason)) return false;
  NotificationRepository::job_failed(tx, notifications, job_id);
  return true;
}

namespace {

// What a claimed job's cases are judged with where kernelwatch.json sets no
// threshold: the agent screens the first pass of an A/B by it.
json project_thresholds(pqxx::work& tx, const std::string& project) {
  const ProjectSettings settings = SettingsRepository::get(tx, RunRepository::require_project(tx, project));
  return {{"min_threshold", settings.min_threshold}, {"cases", settings.case_thresholds}};
}

// The projects a claim may take jobs of: those its token names and, when the
// agent says which it serves, of those alone (a job it cannot fetch is never
// claimed, dropped and left to expire).
std::optional<std::vector<std::string>> claimable(const Caller& caller,
                                                  const std::optional<std::vector<std::string>>& serves) {
  if (!serves) return caller.projects;
  std::vector<std::string> names;
  std::copy_if(serves->begin(), serves->end(), std::back_inserter(names),
               [&caller](const std::string& project) { return caller.may_access(project); });
  return names;
}

}  // namespace

std::pair<bool, json> JobService::create(const Caller& caller, const std::string& project, NewJob job) {
  caller.require_project(project);
  job.max_attempts = settings_.max_attempts;
  return with_transaction(pool_, [&](pqxx::work& tx) {
    job.project_id = RunRepository::require_project(tx, project);
    auto [job_id, created] = JobRepository::create(tx, job);
    json document = *JobRepository::get(tx, job_id);
    if (created) NotificationRepository::job_queued(tx, notifications_, job.project_id, document);
    return std::make_pair(created, document);
  });
}

json JobService::get(const Caller* caller, std::int64_t job_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) { return owned_job(tx, caller, job_id); });
}

std::string JobService::agents(const Caller* caller) {
  std::optional<std::vector<std::string>> only;
  if (caller) only = caller->projects;
  return with_transaction(pool_, [&](pqxx::work& tx) { return JobRepository::agents_json(tx, only); });
}

std::optional<json> JobService::claim(const Caller& caller, const ClaimRequest& ask) {
  const auto projects = claimable(caller, ask.serves);
  auto job = with_transaction(pool_, [&](pqxx::work& tx) -> std::optional<json> {
    std::int64_t agent_id = JobRepository::bind_agent(tx, ask.agent, caller, ask.host, ask.version, ask.gpus);
    JobRepository::record_worker(tx, agent_id, ask.gpu, ask.health, ask.can_profile);
    requeue_expired(tx, notifications_);
    // A GPU that failed its health check measures nothing until it passes.
    if (ask.health && !(*ask.health)["healthy"].get<bool>()) return std::nullopt;
    auto job_id =
        JobRepository::claim(tx, agent_id, ask.gpus, settings_.lease_seconds, projects, ask.can_profile);
    if (!job_id) return std::nullopt;
    std::optional<json> claimed = JobRepository::get(tx, *job_id);
    if (claimed) (*claimed)["project_thresholds"] = project_thresholds(tx, (*claimed)["project"]);
    return claimed;
  });
  if (job) (*job)["lease_seconds"] = settings_.lease_seconds;
  return job;
}

template <typename Action>
json JobService::as_holder(const Caller& caller, std::int64_t job_id, const std::string& agent,
                           const char* verb, Action&& action) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    auto hold = JobRepository::lock(tx, job_id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
    caller.require_project(RunRepository::project_name(tx, hold->project_id));
    std::int64_t agent_id = JobRepository::registered_agent(tx, agent, caller);
    if (!action(tx, agent_id)) {
      auto current = JobRepository::get(tx, job_id);
      throw Conflict("job_not_held", "agent \"" + agent + "\" does not hold job " + std::to_string(job_id) +
                                         " (state " + current->value("state", "") + "); cannot " + verb);
    }
    return *JobRepository::get(tx, job_id);
  });
}

json JobService::heartbeat(const Caller& caller, std::int64_t job_id, const std::string& agent) {
  return as_holder(caller, job_id, agent, "heartbeat", [&](pqxx::work& tx, std::int64_t agent_id) {
    return JobRepository::heartbeat(tx, job_id, agent_id, settings_.lease_seconds);
  });
}

json JobService::release(const Caller& caller, std::int64_t job_id, const std::string& agent) {
  return as_holder(caller, job_id, agent, "release", [&](pqxx::work& tx, std::int64_t agent_id) {
    return JobRepository::release(tx, job_id, agent_id);
  });
}

json JobService::record_stage(const Caller& caller, std::int64_t job_id, const std::string& agent,
                              const StageProgress& progress) {
  return as_holder(caller, job_id, agent, "record a stage", [&](pqxx::work& tx, std::int64_t agent_id) {
    return JobRepository::record_stage(tx, job_id, agent_id, settings_.lease_seconds, progress);
  });
}

json JobService::fail(const Caller& caller, std::int64_t job_id, const std::string& agent,
                      const std::string& reason) {
  const std::string error = "agent \"" + agent + "\" could not run it: " + reason;
  return as_holder(caller, job_id, agent, "fail it", [&](pqxx::work& tx, std::int64_t agent_id) {
    return fail_job(tx, notifications_, job_id, agent_id, error);
  });
}

ExpiredLeases JobService::reap() {
  return with_transaction(pool_, [&](pqxx::work& tx) { return requeue_expired(tx, notifications_); });
}

std::vector<std::int64_t> JobService::unmerged_shard_jobs() {
  return with_transaction(pool_, [](pqxx::work& tx) { return JobRepository::merge_pending(tx); });
}

json BisectService::get(const Caller* caller, std::int64_t bisect_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    owned_bisect(tx, caller, bisect_id);
    return *BisectRepository::get(tx, bisect_id);
  });
}

json BisectService::cancel(const Caller& caller, std::int64_t bisect_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    owned_bisect(tx, &caller, bisect_id);
    auto previous = BisectRepository::cancel(tx, bisect_id);
    if (*previous != "running")
      throw Conflict("bisect_ended",
                     "bisect " + std::to_string(bisect_id) + " has ended (" + *previous + ")");
    return *BisectRepository::get(tx, bisect_id);
  });
}

}  // namespace kw::server
