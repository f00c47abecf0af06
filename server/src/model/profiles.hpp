// A profile asked for, and what an agent posts for a profile job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kw::server {

struct ProfileRequest {
  std::int64_t run_id = 0;
  std::string case_name;
  // The commit to profile beside the run's; nullopt: the one the case was
  // compared with (none when it had no baseline: the head alone).
  std::optional<std::string> base_commit;
  int launch_count = 10;
  std::string kernel_regex;  // empty: every kernel of the case
  std::string reason = "requested";
  std::string requested_by;
  int max_attempts = 3;
  // A new profile though the same one exists (queued, running or done).
  bool again = false;
};

// A profile job's profile: what its result is checked against.
struct ProfileJobFacts {
  std::int64_t profile_id = 0;
  std::string case_name, head_commit;
  std::optional<std::string> base_commit;  // nullopt: the head alone
};

// What an agent posts for a profile job it holds.
struct ProfileResult {
  nlohmann::json summary;
  std::string base_csv, head_csv;
};

}  // namespace kw::server
