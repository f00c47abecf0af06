#include "service/job_service.hpp"

#include <algorithm>

#include "errors.hpp"
#include "service/bisect_service.hpp"
#include "service/ownership.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// A job that ended without a run (never a shard: fail_with_shards names its
// job), announced in the transaction that failed it: a profile's failure is
// no status of a commit; a bisect's step is skipped, and the bisect goes on
// or ends.
void announce_failure(JobTransaction& tx, std::int64_t job_id) {
  if (tx.get(job_id)->value("kind", std::string()) == "profile") {
    tx.profile_ended(job_id);
    return;
  }
  tx.job_failed(job_id);
  if (auto ended = BisectService::step_failed(tx.bisects(), job_id)) tx.bisect_ended(*ended);
}

// A shard that failed fails its job and the job's other shards not yet
// ended, so that no agent measures for a run that cannot be made. The job
// that failed for it: the shard's job, or the job itself when no shard.
std::int64_t fail_with_shards(JobTransaction& tx, std::int64_t job_id, const std::string& reason) {
  const json job = *tx.get(job_id);
  if (job.value("kind", std::string()) != "shard") return job_id;
  const json& shard = job["shard"];
  tx.fail_shard_group(
      job_id, "shard " + shard["index"].dump() + " of " + shard["count"].dump() + " failed: " + reason);
  return shard["job_id"].get<std::int64_t>();
}

// What a claimed job's cases are judged with: the project's thresholds
// (where kernelwatch.json sets none) and its detection settings; the agent
// screens and decides its A/B by them, as the server will judge.
void add_project_settings(JobTransaction& tx, json& job) {
  const ProjectSettings settings = tx.project_settings(tx.existing_project_id(job["project"]));
  job["project_thresholds"] = {{"min_threshold", settings.min_threshold},
                               {"cases", settings.case_thresholds}};
  job["project_detection"] = common::project_detection_json(settings.detection());
}

// Skipping identical code is trusted by its audit, which says little while
// few cases have been audited: until a project has audited this many
// identical cases on a GPU model, its jobs on that model audit at least
// kWarmUpAuditShare of their identical cases (a project whose
// kernelwatch.json turns the audit off, audit_share 0, keeps it off).
constexpr std::int64_t kWarmUpAuditedCases = 300;
constexpr double kWarmUpAuditShare = 0.25;

// The GPU model a claim measures on: its worker's, or the one model its host has.
std::optional<std::string> claimed_model(const ClaimRequest& ask) {
  if (ask.gpu && ask.gpu->contains("model") && (*ask.gpu)["model"].is_string())
    return (*ask.gpu)["model"].get<std::string>();
  if (ask.gpus.is_array() && ask.gpus.size() == 1 && ask.gpus[0].is_string())
    return ask.gpus[0].get<std::string>();
  return std::nullopt;
}

// The audit a claimed job owes: {"gpu_model", "audited", "until", "share"},
// share null once the model has its audited cases (the project's own share
// then).
void add_audit_share(JobTransaction& tx, json& job, const ClaimRequest& ask) {
  const std::optional<std::string> model = claimed_model(ask);
  if (!model) return;
  const std::int64_t audited = tx.audited_cases(tx.existing_project_id(job["project"]), *model);
  job["audit"] = {{"gpu_model", *model},
                  {"audited", audited},
                  {"until", kWarmUpAuditedCases},
                  {"share", audited < kWarmUpAuditedCases ? json(kWarmUpAuditShare) : json()}};
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

bool fail_job(JobTransaction& tx, std::int64_t job_id, std::int64_t agent_id, const std::string& reason) {
  if (!tx.fail(job_id, agent_id, reason)) return false;
  announce_failure(tx, fail_with_shards(tx, job_id, reason));
  return true;
}

ExpiredLeases requeue_expired(JobTransaction& tx) {
  ExpiredLeases leases = tx.requeue_expired();
  for (const FailedShard& shard : leases.failed_shards) {
    const std::int64_t failed = fail_with_shards(tx, shard.shard_job_id, shard.reason);
    if (std::find(leases.failed.begin(), leases.failed.end(), failed) == leases.failed.end())
      leases.failed.push_back(failed);
  }
  for (std::int64_t failed : leases.failed) announce_failure(tx, failed);
  return leases;
}

bool fail_unmerged_job(JobTransaction& tx, std::int64_t job_id, const std::string& reason) {
  if (!tx.fail_unmerged(job_id, reason)) return false;
  announce_failure(tx, job_id);
  return true;
}

std::pair<bool, json> JobService::create(const Caller& caller, const std::string& project, NewJob job) {
  caller.require_project(project);
  job.max_attempts = settings_.max_attempts;
  job.token_id = caller.token_id;
  return in_transaction(store_, [&](JobTransaction& tx) {
    job.project_id = tx.existing_project_id(project);
    if (job.shards > 1) {
      const std::int64_t queued = tx.queued_shards_of_token(caller.token_id);
      if (queued + job.shards > kMaxQueuedShardsPerToken)
        throw TooManyRequests("too_many_shards",
                              "token \"" + caller.token_name + "\" has " + std::to_string(queued) +
                                  " shards queued; " + std::to_string(job.shards) +
                                  " more would pass its limit of " +
                                  std::to_string(kMaxQueuedShardsPerToken) + ": wait for them to be claimed");
    }
    auto [job_id, created] = tx.create(job);
    json document = *tx.get(job_id);
    if (created) tx.job_queued(job.project_id, document);
    return std::make_pair(created, document);
  });
}

json JobService::get(const Caller* caller, std::int64_t job_id) {
  return in_transaction(store_, [&](JobTransaction& tx) { return owned_job(tx, caller, job_id); });
}

std::string JobService::agents(const Caller* caller) {
  std::optional<std::vector<std::string>> only;
  if (caller) only = caller->projects;
  return in_transaction(store_, [&](JobTransaction& tx) { return tx.agents_json(only); });
}

std::optional<json> JobService::claim(const Caller& caller, const ClaimRequest& ask) {
  const auto projects = claimable(caller, ask.serves);
  auto job = in_transaction(store_, [&](JobTransaction& tx) -> std::optional<json> {
    std::int64_t agent_id = tx.bind_agent(ask.agent, caller, ask.host, ask.version, ask.gpus);
    tx.record_worker(agent_id, ask.gpu, ask.health, ask.can_profile);
    requeue_expired(tx);
    // A GPU that failed its health check measures nothing until it passes.
    if (ask.health && !(*ask.health)["healthy"].get<bool>()) return std::nullopt;
    auto job_id = tx.claim(agent_id, ask.gpus, settings_.lease_seconds, projects, ask.can_profile);
    if (!job_id) return std::nullopt;
    std::optional<json> claimed = tx.get(*job_id);
    if (claimed) {
      add_project_settings(tx, *claimed);
      add_audit_share(tx, *claimed, ask);
    }
    return claimed;
  });
  if (job) (*job)["lease_seconds"] = settings_.lease_seconds;
  return job;
}

template <typename Action>
json JobService::as_holder(const Caller& caller, std::int64_t job_id, const std::string& agent,
                           const char* verb, Action&& action) {
  return in_transaction(store_, [&](JobTransaction& tx) {
    auto hold = tx.lock(job_id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
    caller.require_project(tx.project_name(hold->project_id));
    std::int64_t agent_id = tx.registered_agent(agent, caller);
    if (!action(tx, agent_id)) {
      auto current = tx.get(job_id);
      throw Conflict("job_not_held", "agent \"" + agent + "\" does not hold job " + std::to_string(job_id) +
                                         " (state " + current->value("state", "") + "); cannot " + verb);
    }
    return *tx.get(job_id);
  });
}

json JobService::heartbeat(const Caller& caller, std::int64_t job_id, const std::string& agent) {
  return as_holder(caller, job_id, agent, "heartbeat", [&](JobTransaction& tx, std::int64_t agent_id) {
    return tx.heartbeat(job_id, agent_id, settings_.lease_seconds);
  });
}

json JobService::release(const Caller& caller, std::int64_t job_id, const std::string& agent) {
  return as_holder(caller, job_id, agent, "release",
                   [&](JobTransaction& tx, std::int64_t agent_id) { return tx.release(job_id, agent_id); });
}

json JobService::record_stage(const Caller& caller, std::int64_t job_id, const std::string& agent,
                              const StageProgress& progress) {
  return as_holder(caller, job_id, agent, "record a stage", [&](JobTransaction& tx, std::int64_t agent_id) {
    return tx.record_stage(job_id, agent_id, settings_.lease_seconds, progress);
  });
}

json JobService::fail(const Caller& caller, std::int64_t job_id, const std::string& agent,
                      const std::string& reason) {
  const std::string error = "agent \"" + agent + "\" could not run it: " + reason;
  return as_holder(caller, job_id, agent, "fail it", [&](JobTransaction& tx, std::int64_t agent_id) {
    return fail_job(tx, job_id, agent_id, error);
  });
}

ExpiredLeases JobService::reap() {
  return in_transaction(store_, [](JobTransaction& tx) { return requeue_expired(tx); });
}

std::vector<std::int64_t> JobService::unmerged_shard_jobs() {
  return in_transaction(store_, [](JobTransaction& tx) { return tx.merge_pending(); });
}

}  // namespace kw::server
