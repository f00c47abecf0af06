// A push's regression searched commit by commit, each step a job: the
// bisect's rules (when one starts, how a step's run moves its bounds, which
// commit is measured next, when it ends), over the bisect store's facts.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "model/jobs.hpp"
#include "service/bisect_store.hpp"

namespace kw::server {

class BisectService {
 public:
  explicit BisectService(BisectStore& store) : store_(store) {}
  nlohmann::json get(const Caller* caller, std::int64_t bisect_id);
  // Conflict ("bisect_ended") when it is no longer running.
  nlohmann::json cancel(const Caller& caller, std::int64_t bisect_id);

  // Inside the transaction that judged a job's run: starts a bisect for a
  // regression on the default branch whose job has a range of more than one
  // commit, or moves the bisect the run is a step of.
  static BisectAfterRun after_run(BisectTransaction& tx, std::int64_t job_id, std::int64_t run_id);
  // Inside the transaction that failed a job without a run: a step is
  // skipped as a commit that does not build is. The bisect that ended, if any.
  static std::optional<std::int64_t> step_failed(BisectTransaction& tx, std::int64_t job_id);

 private:
  BisectStore& store_;
};

}  // namespace kw::server
