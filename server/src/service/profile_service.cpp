#include "service/profile_service.hpp"

#include "errors.hpp"
#include "service/ownership.hpp"

namespace kw::server {

using nlohmann::json;

std::pair<bool, json> ProfileService::queue(const Caller& caller, ProfileRequest ask) {
  ask.requested_by = caller.token_name;
  ask.max_attempts = max_attempts_;
  return in_transaction(store_, [&](ProfileTransaction& tx) {
    owned_run(tx, &caller, ask.run_id);
    auto [id, created] = tx.queue_profile(ask);
    json document = *tx.get(id);
    const std::string gpu = document["gpu_model"].get<std::string>();
    if (document["state"] == "queued" && !tx.profiler_for(gpu))
      document["note"] = "no agent of " + gpu +
                         " with Nsight Compute (ncu) was seen within a day; the profile waits for one";
    return std::make_pair(created, document);
  });
}

std::string ProfileService::of_run(const Caller* caller, std::int64_t run_id) {
  return in_transaction(store_, [&](ProfileTransaction& tx) {
    owned_run(tx, caller, run_id);
    return tx.of_run_json(run_id);
  });
}

json ProfileService::get(const Caller* caller, std::int64_t profile_id) {
  return in_transaction(store_,
                        [&](ProfileTransaction& tx) { return owned_profile(tx, caller, profile_id); });
}

std::optional<std::string> ProfileService::csv(const Caller* caller, std::int64_t profile_id,
                                               const std::string& side) {
  return in_transaction(store_, [&](ProfileTransaction& tx) {
    owned_profile(tx, caller, profile_id);
    return tx.csv(profile_id, side);
  });
}

json ProfileService::store_result(const Caller& caller, std::int64_t job_id, const std::string& agent,
                                  const ProfileResult& result) {
  return in_transaction(store_, [&](ProfileTransaction& tx) {
    JobTransaction& jobs = tx.queue();
    auto hold = jobs.lock(job_id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
    const json job = owned_job(jobs, &caller, job_id);
    std::int64_t agent_id = jobs.registered_agent(agent, caller);
    if (hold->kind != "profile")
      throw Conflict("not_a_profile_job", "job " + std::to_string(job_id) +
                                              " is a measurement: its report goes to POST /api/v1/jobs/" +
                                              std::to_string(job_id) + "/report");
    const std::int64_t profile_id = job["profile"]["id"];
    if (hold->state == "done") return owned_profile(tx, &caller, profile_id);
    if (hold->state != "running" || hold->agent_id != agent_id)
      throw Conflict("job_not_held", "agent \"" + agent + "\" does not hold job " + std::to_string(job_id) +
                                         " (state " + hold->state + ")");
    tx.store(job_id, result);
    tx.profile_ended(job_id);
    return *tx.get(profile_id);
  });
}

}  // namespace kw::server
