// Bisects: which commit of a push brought a default-branch regression. The
// push's range comes with its job (kw submit --range-from); a regression run
// of such a job starts a bisect over it, one job per step: the midpoint
// measured A/B against the newest commit known good, judged on the cases the
// regression flagged. A step that does not build is skipped (git bisect
// skip); the search stops at the first bad commit, after max_steps, or when
// cancelled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "model/jobs.hpp"
#include "store/database.hpp"

namespace kw::server {

class BisectRepository {
 public:
  // Called with a job's run once it is judged: starts a bisect for a
  // regression on the default branch whose job has a range of more than one
  // commit, or moves the bisect the run is a step of.
  static BisectAfterRun after_run(pqxx::work& tx, std::int64_t job_id, std::int64_t run_id);
  // A step job that ended without a run (its agent could not run it): skipped.
  static std::optional<std::int64_t> step_failed(pqxx::work& tx, std::int64_t job_id);

  static std::optional<nlohmann::json> get(pqxx::work& tx, std::int64_t bisect_id);
  // Stops a running bisect and its queued steps; the previous state, nullopt: no such bisect.
  static std::optional<std::string> cancel(pqxx::work& tx, std::int64_t bisect_id);
  static std::optional<std::string> project_of(pqxx::work& tx, std::int64_t bisect_id);
};

}  // namespace kw::server
