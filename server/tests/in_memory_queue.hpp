// The queue of the in-memory stand-in for kw-server's database
// (in_memory_store.hpp), as JobRepository keeps it: one measurement per
// commit, side and GPU class; the oldest queued job claimed first, profiles
// last; shards made with their job and failed with it, their reports kept
// until the job's run is made. Its leases run on the state's clock, which a
// test moves, never on the wall's.
//
// Both it and PgJobStore pass job_store_contract.hpp; its bisects
// (in_memory_bisects.hpp) pass bisect_store_contract.hpp. What it does not
// keep (timestamps, an agent's offline state, a revoked token's agents taken
// over, the profiles of jobs) is tested on PostgreSQL only.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "errors.hpp"
#include "in_memory_bisects.hpp"
#include "in_memory_state.hpp"
#include "service/job_store.hpp"

namespace kw::server::testing {

class InMemoryQueue final : public JobTransaction {
 public:
  explicit InMemoryQueue(MemoryState& state) : s_(state) {}

  std::int64_t existing_project_id(const std::string& name) override { return s_.existing_project_id(name); }
  std::string project_name(std::int64_t project_id) override { return project(project_id).name; }
  ProjectSettings project_settings(std::int64_t project_id) override { return project(project_id); }

  std::int64_t audited_cases(std::int64_t project_id, const std::string& gpu_model) override {
    std::int64_t audited = 0;
    for (const MemoryRun& run : s_.runs) {
      if (run.project_id != project_id || run.gpu_model != gpu_model || !run.cases) continue;
      for (const MemoryCase& c : *run.cases) audited += c.measured->audit;
    }
    return audited;
  }

  std::pair<std::int64_t, bool> create(const NewJob& asked) override {
    const bool default_side = asked.branch == project(asked.project_id).default_branch;
    const MemoryJob* latest = nullptr;
    for (const MemoryJob& job : s_.jobs) {
      if (job.kind == "measure" && job.asked.project_id == asked.project_id &&
          job.asked.commit == asked.commit && job.asked.gpu_class == asked.gpu_class &&
          job.on_default_branch == default_side && (!latest || job.rerun > latest->rerun))
        latest = &job;
    }
    if (latest && !asked.rerun) return {latest->id, false};
    MemoryJob job;
    job.id = next_job_id();
    job.asked = asked;
    job.on_default_branch = default_side;
    job.rerun = latest ? latest->rerun + 1 : 0;
    s_.jobs.push_back(job);
    if (asked.shards > 1) split(job.id, asked.shards);
    return {job.id, true};
  }

  std::int64_t queued_shards_of_token(std::int64_t token_id) override {
    std::int64_t queued = 0;
    for (const MemoryJob& shard : s_.jobs) {
      if (shard.kind != "shard" || shard.state != "queued" || !shard.parent) continue;
      const MemoryJob* parent = find(*shard.parent);
      queued += parent && parent->asked.token_id == token_id && parent->state == "running";
    }
    return queued;
  }

  std::optional<nlohmann::json> get(std::int64_t job_id) override {
    const MemoryJob* job = find(job_id);
    if (!job) return std::nullopt;
    nlohmann::json document = summary(*job);
    document["max_attempts"] = job->asked.max_attempts;
    document["base_commit"] = optional_json(job->asked.base_commit);
    document["pr"] = optional_json(job->asked.pr);
    document["gpu_class"] = job->asked.gpu_class;
    document["rerun"] = job->rerun;
    document["on_default_branch"] = job->on_default_branch;
    document["range"] = job->asked.range.empty() ? nlohmann::json() : nlohmann::json(job->asked.range);
    document["bisect_id"] = optional_json(job->asked.bisect_id);
    document["shards"] = job->kind == "shard" ? 1 : job->shards;
    document["shard"] = nullptr;
    if (job->kind == "shard")
      document["shard"] = {{"index", job->shard_index}, {"count", shards_of(*job)}, {"job_id", *job->parent}};
    document["shard_jobs"] = nullptr;
    if (job->shards > 1) {
      document["shard_jobs"] = nlohmann::json::array();
      for (const MemoryJob& shard : s_.jobs)
        if (shard.parent == job->id) document["shard_jobs"].push_back(summary(shard));
    }
    document["stages"] = nlohmann::json::array();
    for (const StageProgress& stage : job->stages) document["stages"].push_back(stage_json(stage));
    const MemoryRun* run = s_.run_of_job(job->id);
    document["run_id"] = run ? nlohmann::json(run->id) : nlohmann::json();
    document["verdict"] = run ? nlohmann::json(run->verdict) : nlohmann::json();
    return document;
  }

  std::optional<JobHold> lock(std::int64_t job_id) override {
    const MemoryJob* job = find(job_id);
    if (!job) return std::nullopt;
    JobHold hold;
    hold.job_id = job->id;
    hold.project_id = job->asked.project_id;
    hold.commit = job->asked.commit;
    hold.state = job->state;
    hold.kind = job->kind;
    hold.agent_id = job->agent_id;
    hold.parent_job_id = job->parent;
    hold.shard_index = job->shard_index;
    hold.shards = job->kind == "shard" ? shards_of(*job) : job->shards;
    return hold;
  }

  std::int64_t bind_agent(const std::string& name, const Caller& caller, const std::string& host,
                          const std::string& version, const nlohmann::json& gpus) override {
    MemoryAgent* agent = agent_of(name, caller);
    if (!agent) {
      s_.agents.emplace_back();
      agent = &s_.agents.back();
      agent->id = static_cast<std::int64_t>(s_.agents.size());
      agent->name = name;
      agent->token_id = caller.token_id;
      agent->token_projects = caller.projects;
    }
    agent->host = host;
    agent->version = version;
    if (!gpus.empty()) agent->gpus = gpus;
    return agent->id;
  }

  void record_worker(std::int64_t agent_id, const std::optional<nlohmann::json>& gpu,
                     const std::optional<nlohmann::json>& health, bool can_profile) override {
    MemoryAgent& agent = s_.agents.at(agent_id - 1);
    agent.gpu = gpu;
    agent.health = health;
    agent.can_profile = can_profile;
  }

  std::string agents_json(const std::optional<std::vector<std::string>>& projects) override {
    std::vector<const MemoryAgent*> shown;
    for (const MemoryAgent& agent : s_.agents)
      if (!projects || !agent.token_projects || overlaps(*agent.token_projects, *projects))
        shown.push_back(&agent);
    std::stable_sort(shown.begin(), shown.end(),
                     [](const MemoryAgent* a, const MemoryAgent* b) { return a->name < b->name; });
    nlohmann::json list = nlohmann::json::array();
    for (const MemoryAgent* agent : shown) list.push_back(agent_json(*agent, projects));
    return list.dump();
  }

  std::int64_t registered_agent(const std::string& name, const Caller& caller) override {
    const MemoryAgent* agent = agent_of(name, caller);
    if (!agent)
      throw Conflict("agent_not_registered", "agent \"" + name + "\" is not registered under token \"" +
                                                 caller.token_name + "\"; claim a job first");
    return agent->id;
  }

  std::optional<std::int64_t> claim(std::int64_t agent_id, const nlohmann::json& gpu_models,
                                    double lease_seconds,
                                    const std::optional<std::vector<std::string>>& projects,
                                    bool can_profile) override {
    MemoryJob* chosen = nullptr;
    for (MemoryJob& job : s_.jobs) {
      if (job.state != "queued" || !runs_on(job, gpu_models)) continue;
      if (projects && !contains(*projects, project(job.asked.project_id).name)) continue;
      if (job.kind == "profile" && !can_profile) continue;
      // Measurements first, then the oldest.
      if (!chosen || (chosen->kind == "profile" && job.kind != "profile")) chosen = &job;
    }
    if (!chosen) return std::nullopt;
    chosen->state = "running";
    chosen->agent_id = agent_id;
    ++chosen->attempts;
    chosen->lease_expires = s_.now + lease_seconds;
    chosen->stages.clear();
    if (chosen->kind == "shard" && gpu_models.is_array() && !gpu_models.empty() &&
        gpu_models[0].is_string()) {
      for (MemoryJob& sibling : s_.jobs) {
        if (sibling.parent != chosen->parent || sibling.asked.gpu_class != "any") continue;
        sibling.asked.gpu_class = gpu_models[0].get<std::string>();
        sibling.pinned_at = s_.now;
      }
    }
    return chosen->id;
  }

  ExpiredLeases requeue_expired() override {
    ExpiredLeases expired;
    for (MemoryJob& job : s_.jobs) {
      if (job.state != "running" || !job.lease_expires || *job.lease_expires >= s_.now) continue;
      job.agent_id.reset();
      job.lease_expires.reset();
      if (job.attempts < job.asked.max_attempts) {
        job.state = "queued";
        ++expired.requeued;
        continue;
      }
      job.state = "failed";
      job.error = "lease expired " + std::to_string(job.attempts) + " times; giving up";
      if (job.kind == "shard")
        expired.failed_shards.push_back({job.id, "its lease expired on every attempt"});
      else
        expired.failed.push_back(job.id);
    }
    // A job whose shard just ran out of attempts fails for that shard; one stranded shard a job.
    std::vector<std::int64_t> failing;
    for (const FailedShard& failed : expired.failed_shards)
      failing.push_back(*find(failed.shard_job_id)->parent);
    for (MemoryJob& shard : s_.jobs) {
      if (shard.kind != "shard" || shard.state != "queued" || !shard.pinned_at ||
          *shard.pinned_at >= s_.now - kPinnedShardWaitMinutes * 60.0 || contains(failing, *shard.parent))
        continue;
      const std::string reason = "it waited " + std::to_string(kPinnedShardWaitMinutes) +
                                 " minutes for an agent with a " + shard.asked.gpu_class +
                                 " GPU, the model the job's first shard was measured on; none claimed it";
      shard.state = "failed";
      shard.error = "shard " + std::to_string(shard.shard_index) + ": " + reason;
      expired.failed_shards.push_back({shard.id, reason});
      failing.push_back(*shard.parent);
    }
    return expired;
  }

  bool heartbeat(std::int64_t job_id, std::int64_t agent_id, double lease_seconds) override {
    MemoryJob* job = held(job_id, agent_id);
    if (!job) return false;
    job->lease_expires = s_.now + lease_seconds;
    return true;
  }

  bool release(std::int64_t job_id, std::int64_t agent_id) override {
    MemoryJob* job = held(job_id, agent_id);
    if (!job) return false;
    job->state = "queued";
    job->agent_id.reset();
    job->lease_expires.reset();
    job->attempts = std::max(job->attempts - 1, 0);
    job->stages.clear();  // they were the attempt given back's
    return true;
  }

  bool fail(std::int64_t job_id, std::int64_t agent_id, const std::string& reason) override {
    MemoryJob* job = held(job_id, agent_id);
    if (!job) return false;
    job->state = "failed";
    job->error = reason;
    job->lease_expires.reset();
    return true;
  }

  bool record_stage(std::int64_t job_id, std::int64_t agent_id, double lease_seconds,
                    const StageProgress& stage) override {
    MemoryJob* job = held(job_id, agent_id);
    if (!job) return false;
    job->lease_expires = s_.now + lease_seconds;
    auto same = std::find_if(job->stages.begin(), job->stages.end(),
                             [&](const StageProgress& kept) { return kept.name == stage.name; });
    if (same != job->stages.end()) {
      const int ordinal = same->ordinal;  // an update keeps the stage's place
      *same = stage;
      same->ordinal = ordinal;
    } else {
      job->stages.push_back(stage);
    }
    std::stable_sort(job->stages.begin(), job->stages.end(),
                     [](const StageProgress& a, const StageProgress& b) { return a.ordinal < b.ordinal; });
    return true;
  }

  bool fail_unmerged(std::int64_t job_id, const std::string& reason) override {
    MemoryJob* job = find(job_id);
    if (!job || job->state != "running" || job->shards <= 1) return false;
    job->state = "failed";
    job->error = reason;
    return true;
  }

  // Every running sharded job whose shards are done and which has no run.
  std::vector<std::int64_t> merge_pending() override {
    std::vector<std::int64_t> ids;
    for (const MemoryJob& job : s_.jobs) {
      if (job.shards <= 1 || job.kind != "measure" || job.state != "running" || s_.run_of_job(job.id))
        continue;
      const bool all_done = std::all_of(s_.jobs.begin(), s_.jobs.end(), [&](const MemoryJob& shard) {
        return shard.parent != job.id || shard.state == "done";
      });
      if (all_done) ids.push_back(job.id);
    }
    return ids;
  }

  void complete(std::int64_t job_id) override {
    MemoryJob& job = *find(job_id);
    job.state = "done";
    job.lease_expires.reset();
  }

  void store_shard_report(std::int64_t shard_job_id, const nlohmann::json& report) override {
    MemoryJob& shard = *find(shard_job_id);
    shard.shard_report = report;
    shard.state = "done";
    shard.lease_expires.reset();
  }

  std::optional<nlohmann::json> shard_report(std::int64_t shard_job_id) override {
    const MemoryJob* shard = find(shard_job_id);
    return shard ? shard->shard_report : std::nullopt;
  }

  ShardProgress shard_progress(std::int64_t job_id) override {
    const MemoryJob& job = *find(job_id);
    ShardProgress progress{job.state, job.error.value_or(""), {}, {}};
    for (const MemoryJob& shard : s_.jobs) {
      if (shard.parent != job_id) continue;
      if (shard.state != "done" || !shard.shard_report)
        progress.waiting_for.push_back(shard.shard_index);
      else
        progress.reports.push_back(shard.shard_report->dump());
    }
    if (!progress.waiting_for.empty()) progress.reports.clear();
    return progress;
  }

  void job_queued(std::int64_t /*project_id*/, const nlohmann::json& job) override {
    s_.notices.push_back({"job_queued", job["id"].get<std::int64_t>()});
  }
  void job_failed(std::int64_t job_id) override { s_.notices.push_back({"job_failed", job_id}); }
  void profile_ended(std::int64_t job_id) override { s_.notices.push_back({"profile_ended", job_id}); }
  void bisect_ended(std::int64_t bisect_id) override {
    s_.notices.push_back({"bisect_ended", 0, 0, bisect_id});
  }
  BisectTransaction& bisects() override { return bisects_; }

  void fail_shard_group(std::int64_t shard_job_id, const std::string& error) override {
    const std::int64_t parent = *find(shard_job_id)->parent;
    for (MemoryJob& job : s_.jobs) {
      if ((job.id == parent || job.parent == parent) && job.id != shard_job_id &&
          (job.state == "queued" || job.state == "running")) {
        job.state = "failed";
        job.error = error;
        job.lease_expires.reset();
      }
    }
  }

 private:
  template <typename T>
  static nlohmann::json optional_json(const std::optional<T>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json();
  }
  template <typename T>
  static bool contains(const std::vector<T>& list, const T& value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  }
  static bool overlaps(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return std::any_of(a.begin(), a.end(), [&](const std::string& name) { return contains(b, name); });
  }
  static bool runs_on(const MemoryJob& job, const nlohmann::json& gpu_models) {
    if (job.asked.gpu_class == "any") return true;
    return gpu_models.is_array() && std::any_of(gpu_models.begin(), gpu_models.end(), [&](const auto& model) {
             return model.is_string() && model.template get<std::string>() == job.asked.gpu_class;
           });
  }
  static nlohmann::json stage_json(const StageProgress& stage) {
    return {{"name", stage.name},
            {"status", stage.status},
            {"duration_ms", optional_json(stage.duration_ms)},
            {"gpu_seconds", optional_json(stage.gpu_seconds)},
            {"message", stage.message},
            {"log_tail", stage.log_tail}};
  }

  ProjectSettings& project(std::int64_t id) { return s_.project(id); }
  MemoryJob* find(std::int64_t id) { return s_.job(id); }
  MemoryJob* held(std::int64_t job_id, std::int64_t agent_id) {
    MemoryJob* job = find(job_id);
    return job && job->state == "running" && job->agent_id == agent_id ? job : nullptr;
  }
  MemoryAgent* agent_of(const std::string& name, const Caller& caller) {
    for (MemoryAgent& agent : s_.agents)
      if (agent.name == name && agent.token_id == caller.token_id) return &agent;
    return nullptr;
  }
  std::int64_t next_job_id() const { return static_cast<std::int64_t>(s_.jobs.size()) + 1; }
  std::int64_t shards_of(const MemoryJob& shard) { return find(*shard.parent)->shards; }

  // What a job's document and its shards' entries share.
  nlohmann::json summary(const MemoryJob& job) {
    nlohmann::json document{{"id", job.id},
                            {"project", project(job.asked.project_id).name},
                            {"commit", job.asked.commit},
                            {"branch", job.asked.branch},
                            {"state", job.state},
                            {"kind", job.kind},
                            {"attempts", job.attempts},
                            {"error", optional_json(job.error)},
                            {"agent", nullptr}};
    if (job.kind == "shard") {
      document["index"] = job.shard_index;
      document["cases"] =
          job.shard_report ? nlohmann::json((*job.shard_report)["cases"].size()) : nlohmann::json();
    }
    if (job.agent_id) document["agent"] = s_.agents.at(*job.agent_id - 1).name;
    return document;
  }

  nlohmann::json agent_json(const MemoryAgent& agent,
                            const std::optional<std::vector<std::string>>& projects) {
    const MemoryJob* running = nullptr;
    for (const MemoryJob& job : s_.jobs) {
      if (job.agent_id == agent.id && job.state == "running" &&
          (!projects || contains(*projects, project(job.asked.project_id).name)))
        running = &job;  // the newest
    }
    const bool unhealthy = agent.health && agent.health->value("healthy", true) == false;
    nlohmann::json shown{{"name", agent.name},
                         {"host", agent.host},
                         {"version", agent.version},
                         {"gpus", agent.gpus},
                         {"gpu", optional_json(agent.gpu)},
                         {"health", optional_json(agent.health)},
                         {"state", running     ? "running"
                                   : unhealthy ? "unhealthy"
                                               : "idle"},
                         {"job", nullptr},
                         {"can_profile", agent.can_profile}};
    if (running)
      shown["job"] = {{"id", running->id},
                      {"project", project(running->asked.project_id).name},
                      {"commit", running->asked.commit},
                      {"branch", running->asked.branch},
                      {"kind", running->kind}};
    return shown;
  }

  void split(std::int64_t job_id, int shards) {
    MemoryJob& parent = *find(job_id);
    parent.shards = shards;
    parent.state = "running";
    const MemoryJob model = parent;
    for (int k = 1; k <= shards; ++k) {
      MemoryJob shard = model;
      shard.id = next_job_id();
      shard.kind = "shard";
      shard.state = "queued";
      shard.shards = 1;
      shard.parent = job_id;
      shard.shard_index = k;
      s_.jobs.push_back(shard);
    }
  }

  MemoryState& s_;
  InMemoryBisects bisects_{s_, *this};
};
}  // namespace kw::server::testing
