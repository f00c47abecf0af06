// What a notification says, read from the store: a project's delivery
// targets and the facts of a run's verdict, an ended bisect or profile.
// notify/ composes statuses and webhooks from them and sends them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace kw::server {

struct ProjectTargets {
  std::string name, github_repo, webhook_url, gitlab_project;  // empty: not set
};

struct RegressedCase {
  std::string name;
  std::string kind;  // "time" or "energy"
  double ratio = 1, lower = 1, upper = 1;
};

struct VerdictFacts {
  std::int64_t project_id = 0;
  std::string commit, branch, verdict, gpu_model;
  std::optional<std::int64_t> job_id;
  std::string gpu_class = "any";
  std::string acknowledged_by, acknowledged_reason;  // empty: not acknowledged
  std::vector<RegressedCase> regressions;            // time first, then energy; worst first
  std::string failed_stage;                          // "name: message" of a failed run's first failed stage
  std::optional<std::string> full_bench_skipped;     // why, for a no-data run whose full_bench was skipped
  int compared = 0;                                  // candidate time comparisons that had a baseline
  int inconclusive = 0;                              // of those, moved past the threshold unproven
  std::string inconclusive_gate;                     // common::inconclusive_gate_text of the run
};

struct BisectFacts {
  std::int64_t project_id = 0, run_id = 0;
  std::string state, first_bad, gpu_class, message, cases, commit;
  int steps = 0;
};

struct ProfileFacts {
  std::int64_t project_id = 0, profile_id = 0, run_id = 0;
  std::string case_name, reason, state, error, head_commit, base_commit;
};

class NotificationFacts {
 public:
  static ProjectTargets targets(pqxx::work& tx, std::int64_t project_id);
  static std::int64_t project_of_job(pqxx::work& tx, std::int64_t job_id);
  static VerdictFacts verdict(pqxx::work& tx, std::int64_t run_id);
  static BisectFacts bisect(pqxx::work& tx, std::int64_t bisect_id);
  // The profile a profile job made.
  static ProfileFacts profile(pqxx::work& tx, std::int64_t job_id);
};

}  // namespace kw::server
