// Nsight Compute profiles of a run's cases: queued on demand, read, and the
// result an agent's profile job posts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "service/profile_store.hpp"

namespace kw::server {

class ProfileService {
 public:
  ProfileService(ProfileStore& store, int max_attempts) : store_(store), max_attempts_(max_attempts) {}

  // {created, profile}; a profile waiting with no agent able to take it says so in `note`.
  std::pair<bool, nlohmann::json> queue(const Caller& caller, ProfileRequest ask);
  std::string of_run(const Caller* caller, std::int64_t run_id);
  nlohmann::json get(const Caller* caller, std::int64_t profile_id);
  // ncu's CSV of one side ("base" or "head"); nullopt: none (yet).
  std::optional<std::string> csv(const Caller* caller, std::int64_t profile_id, const std::string& side);
  // The holder of profile job `job_id` posts its result; a retry of one
  // stored is answered as before.
  nlohmann::json store_result(const Caller& caller, std::int64_t job_id, const std::string& agent,
                              const ProfileResult& result);

 private:
  ProfileStore& store_;
  int max_attempts_;
};

}  // namespace kw::server
