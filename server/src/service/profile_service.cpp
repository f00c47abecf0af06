#include "service/profile_service.hpp"

#include "errors.hpp"
#include "kw/common/json_reader.hpp"
#include "service/ownership.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

const json& member(const json& object, const std::string& key, const std::string& at) {
  if (!object.is_object() || !object.contains(key))
    throw Unprocessable("missing_field", at + "." + key, "is required");
  return object[key];
}

void require_number(const json& value, const std::string& at, bool nullable) {
  if (value.is_number() || (nullable && value.is_null())) return;
  throw Unprocessable("wrong_type", at, nullable ? "must be a number or null" : "must be a number");
}

// One side of kw profile's summary: {"commit", "kernels": {name: {launches,
// time_us, sm_pct, memory_pct, occupancy_pct, stalls: [{reason,
// cycles_per_issue}]}}}, for the commit the job names.
void check_side(const json& summary, const std::string& side, const std::string& commit) {
  const std::string at = "summary." + side;
  const json& part = member(summary, side, "summary");
  const json& named = member(part, "commit", at);
  if (!named.is_string() || named.get<std::string>() != commit)
    throw Unprocessable("inconsistent", at + ".commit", "must be the job's " + side + " commit " + commit);
  const json& kernels = member(part, "kernels", at);
  if (!kernels.is_object() || kernels.empty())
    throw Unprocessable("invalid_value", at + ".kernels", "must be an object of at least one kernel");
  for (const auto& [name, kernel] : kernels.items()) {
    const std::string k = std::string(at).append(".kernels[\"").append(name).append("\"]");
    if (name.empty() || name.size() > common::kMaxTextBytes)
      throw Unprocessable("invalid_value", at + ".kernels", "a kernel name must be 1 to 65536 bytes");
    const json& launches = member(kernel, "launches", k);
    if (!launches.is_number_integer() || launches.get<std::int64_t>() < 0)
      throw Unprocessable("wrong_type", k + ".launches", "must be an integer >= 0");
    require_number(member(kernel, "time_us", k), k + ".time_us", true);
    for (const char* key : {"sm_pct", "memory_pct", "occupancy_pct"})
      require_number(member(kernel, key, k), k + "." + key, true);
    const json& stalls = member(kernel, "stalls", k);
    if (!stalls.is_array()) throw Unprocessable("wrong_type", k + ".stalls", "must be an array");
    for (std::size_t i = 0; i < stalls.size(); ++i) {
      const std::string s = k + ".stalls[" + std::to_string(i) + "]";
      if (!member(stalls[i], "reason", s).is_string())
        throw Unprocessable("wrong_type", s + ".reason", "must be a string");
      require_number(member(stalls[i], "cycles_per_issue", s), s + ".cycles_per_issue", false);
    }
  }
}

// kw profile's summary and CSVs, held to the job they answer: its case,
// its head and base commits (Unprocessable naming the field otherwise).
void check_result(const ProfileJobFacts& job, const ProfileResult& result) {
  const json& summary = result.summary;
  if (!summary.is_object())
    throw Unprocessable("wrong_type", "summary", "must be an object (kw profile's profile.json)");
  const json& named = member(summary, "case", "summary");
  if (!named.is_string() || named.get<std::string>() != job.case_name)
    throw Unprocessable("inconsistent", "summary.case",
                        "must be the profile's case \"" + job.case_name + "\"");
  check_side(summary, "head", job.head_commit);
  if (job.base_commit) {
    check_side(summary, "base", *job.base_commit);
  } else if (summary.contains("base")) {
    throw Unprocessable("inconsistent", "summary.base", "the job profiles the head alone");
  }
  for (const auto& [field, csv] : {std::pair{"base_csv", &result.base_csv}, {"head_csv", &result.head_csv}}) {
    if (csv->size() > common::kMaxProfileCsvBytes)
      throw Unprocessable("too_long", field,
                          "at most " + std::to_string(common::kMaxProfileCsvBytes) + " bytes");
  }
}

}  // namespace

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
    const std::optional<ProfileJobFacts> facts = tx.job_facts(job_id);
    if (!facts) throw Conflict("not_a_profile_job", "job " + std::to_string(job_id) + " is no profile job");
    check_result(*facts, result);
    tx.store(facts->profile_id, result);
    jobs.complete(job_id);
    tx.profile_ended(job_id);
    return *tx.get(profile_id);
  });
}

}  // namespace kw::server
