#include "service/profile_service.hpp"

#include "errors.hpp"
#include "service/ownership.hpp"
#include "store/job_repository.hpp"

namespace kw::server {

using nlohmann::json;

std::pair<bool, json> ProfileService::queue(const Caller& caller, ProfileRequest ask) {
  ask.requested_by = caller.token_name;
  ask.max_attempts = max_attempts_;
  return with_transaction(pool_, [&](pqxx::work& tx) {
    owned_run(tx, &caller, ask.run_id);
    auto [id, created] = ProfileRepository::queue(tx, ask);
    json document = *ProfileRepository::get(tx, id);
    const std::string gpu = document["gpu_model"].get<std::string>();
    if (document["state"] == "queued" && !ProfileRepository::profiler_for(tx, gpu))
      document["note"] = "no agent of " + gpu +
                         " with Nsight Compute (ncu) was seen within a day; the profile waits for one";
    return std::make_pair(created, document);
  });
}

std::string ProfileService::of_run(const Caller* caller, std::int64_t run_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    owned_run(tx, caller, run_id);
    return ProfileRepository::of_run_json(tx, run_id);
  });
}

json ProfileService::get(const Caller* caller, std::int64_t profile_id) {
  return with_transaction(pool_, [&](pqxx::work& tx) { return owned_profile(tx, caller, profile_id); });
}

std::optional<std::string> ProfileService::csv(const Caller* caller, std::int64_t profile_id,
                                               const std::string& side) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    owned_profile(tx, caller, profile_id);
    return ProfileRepository::csv(tx, profile_id, side);
  });
}

json ProfileService::store_result(const Caller& caller, std::int64_t job_id, const std::string& agent,
                                  const ProfileResult& result) {
  return with_transaction(pool_, [&](pqxx::work& tx) {
    auto hold = JobRepository::lock(tx, job_id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
    PgJobTransaction jobs(tx, notifications_);
    const json job = owned_job(jobs, &caller, job_id);
    std::int64_t agent_id = JobRepository::registered_agent(tx, agent, caller);
    if (hold->kind != "profile")
      throw Conflict("not_a_profile_job", "job " + std::to_string(job_id) +
                                              " is a measurement: its report goes to POST /api/v1/jobs/" +
                                              std::to_string(job_id) + "/report");
    const std::int64_t profile_id = job["profile"]["id"];
    if (hold->state == "done") return owned_profile(tx, &caller, profile_id);
    if (hold->state != "running" || hold->agent_id != agent_id)
      throw Conflict("job_not_held", "agent \"" + agent + "\" does not hold job " + std::to_string(job_id) +
                                         " (state " + hold->state + ")");
    ProfileRepository::store(tx, job_id, result);
    NotificationRepository::profile_ended(tx, notifications_, job_id);
    return *ProfileRepository::get(tx, profile_id);
  });
}

}  // namespace kw::server
