// Profiles: why a case got slower, from the hardware's counters. A profile
// is a job of kind 'profile' that an agent with Nsight Compute runs (kw
// profile's work: the case under ncu in the run's commit and its base); the
// agent posts kw profile's summary and the raw ncu CSVs, kept with the run.
// Queued on demand, and for a regression, for its worst case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "model/profiles.hpp"
#include "store/database.hpp"

namespace kw::server {

class ProfileRepository {
 public:
  static std::vector<Statement> statements();

  // Returns (profile id, created). Throws NotFound (no run), Unprocessable
  // (no such case) or Conflict (a run without a GPU).
  static std::pair<std::int64_t, bool> queue(pqxx::work& tx, const ProfileRequest& request);
  // After a run is judged: a regression gets its largest time regression
  // profiled when an agent of the run's GPU model that can run ncu was seen
  // within a day (a queued profile nobody can run would wait forever).
  static std::optional<std::int64_t> after_regression(pqxx::work& tx, std::int64_t run_id, int max_attempts);
  // Whether an agent of that GPU model with ncu was seen within a day.
  static bool profiler_for(pqxx::work& tx, const std::string& gpu_model);
  static std::optional<ProfileJobFacts> job_facts(pqxx::work& tx, std::int64_t job_id);
  static void store(pqxx::work& tx, std::int64_t profile_id, const ProfileResult& result);

  static std::optional<nlohmann::json> get(pqxx::work& tx, std::int64_t profile_id);
  // The run's profiles, newest first, with their summaries (no CSV).
  static std::string of_run_json(pqxx::work& tx, std::int64_t run_id);
  // The raw ncu CSV of one side ("base" or "head"); nullopt: none.
  static std::optional<std::string> csv(pqxx::work& tx, std::int64_t profile_id, const std::string& side);
};

}  // namespace kw::server
