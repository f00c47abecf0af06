// A bisect as its rules see it (service/bisect_service.cpp): which commit of
// a push brought a default-branch regression. The push's range comes with
// its job (kw submit --range-from); a regression run of such a job starts a
// bisect over it, one job per step: the midpoint measured A/B against the
// newest commit known good, judged on the cases the regression flagged.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kw::server {

struct Bisect {
  std::int64_t id = 0, project_id = 0;
  std::string gpu_class;
  std::string state = "running";     // running, found, failed or cancelled
  std::vector<std::string> commits;  // the good end first, then the pushed commits in order
  std::vector<std::string> cases;    // the cases the regression flagged
  int good = 0, bad = 0;             // indexes into commits: newest known good, oldest known bad
  std::set<int> skipped;             // indexes of commits that could not be measured
  int steps = 0, max_steps = 0;
  std::string message;                   // how it ended
  std::optional<std::string> first_bad;  // once found
};

// What a judged run of a job tells bisects.
struct BisectRunFacts {
  std::optional<std::int64_t> bisect_id;  // the job is that bisect's step
  bool on_default_branch = false;
  std::vector<std::string> range;  // the job's push: the good end and the pushed commits
  std::string gpu_class;
  std::int64_t project_id = 0;
  std::string commit, verdict;
  bool build_failed = false;
  std::vector<std::string> regressed;  // its candidate's time regressions, by case name
};

// A step as GET /api/v1/bisects/{id} lists it: its job and the job's run.
struct BisectStepRow {
  std::int64_t job_id = 0;
  std::string commit, state;
  std::optional<std::string> base_commit;
  std::optional<std::int64_t> run_id;
  std::optional<std::string> verdict;
};

// What GET /api/v1/bisects/{id} shows (BisectService renders it).
struct BisectView {
  Bisect bisect;
  std::string project;
  std::int64_t run_id = 0;             // the regression it searches
  std::string created_at, updated_at;  // ISO 8601, as the API writes times
  std::vector<BisectStepRow> steps;    // in job order
};

// A step job: its bisect and the commit it measures.
struct BisectStepJob {
  std::int64_t bisect_id = 0;
  std::string commit;
};

}  // namespace kw::server
