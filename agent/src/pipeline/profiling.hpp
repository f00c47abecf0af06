// One case under Nsight Compute (ncu) in built commits: what `kw profile`
// and an agent's profile job share. Per side, ncu runs the case's bench for
// a few samples; its raw CSV is kept as <side>.csv and summarized per kernel.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct ProfileTarget {
  std::string case_name;
  std::string bench;   // empty: the kwbench-speaking bench that lists the case
  std::string kernel;  // empty: every kernel the case launches
  int launch_count = 10;
  std::filesystem::path ncu;
};

struct ProfiledCommit {
  std::string side;  // "base" or "head"
  std::string commit;
  std::filesystem::path tree;  // its built checkout
};

// {"case", "ncu", "launch_count", "<side>": {"commit", "kernels"}} for each
// commit; <side>.csv (ncu's output) and <side>-bench.json written to `out`.
// Throws std::runtime_error naming the side and what failed; `permission`
// is set when ncu was refused the GPU's performance counters.
nlohmann::json profile_commits(const ProfileTarget& target, const std::vector<ProfiledCommit>& commits,
                               const std::filesystem::path& out, const std::atomic<bool>& stop,
                               bool* permission_denied = nullptr);

}  // namespace kw::agent
