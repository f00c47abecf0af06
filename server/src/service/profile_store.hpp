// What ProfileService reads and writes: Nsight Compute profiles of a run's
// cases and the queue's profile jobs, one transaction at a time. kw-server
// keeps them in PostgreSQL (PgProfileStore, over ProfileRepository, whose
// SQL profile_test.cpp runs on); a regression's worst case is queued by the
// run store (RunTransaction::profile_regression).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/profiles.hpp"
#include "service/job_store.hpp"

namespace kw::server {

class ProfileTransaction {
 public:
  virtual ~ProfileTransaction() = default;

  // The queue, in this transaction.
  virtual JobTransaction& queue() = 0;
  // The run's project; nullopt: no such run.
  virtual std::optional<std::string> project_of_run(std::int64_t run_id) = 0;
  // As ProfileRepository's functions of the same names (queue_profile: its queue).
  virtual std::pair<std::int64_t, bool> queue_profile(const ProfileRequest& request) = 0;
  virtual bool profiler_for(const std::string& gpu_model) = 0;
  // The profile a profile job makes; nullopt: the job is no profile job.
  virtual std::optional<ProfileJobFacts> job_facts(std::int64_t job_id) = 0;
  // The profile's result, checked by ProfileService, kept.
  virtual void store(std::int64_t profile_id, const ProfileResult& result) = 0;
  virtual std::optional<nlohmann::json> get(std::int64_t profile_id) = 0;
  virtual std::string of_run_json(std::int64_t run_id) = 0;
  virtual std::optional<std::string> csv(std::int64_t profile_id, const std::string& side) = 0;
  // A profile job that ended: its notice, kept with the transaction.
  virtual void profile_ended(std::int64_t job_id) = 0;
};

class ProfileStore {
 public:
  using Transaction = ProfileTransaction;
  virtual ~ProfileStore() = default;
  virtual void transact(const std::function<void(ProfileTransaction&)>& work) = 0;
};

}  // namespace kw::server
