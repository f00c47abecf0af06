// Regression detection's store: it reads what kw/common/judge.hpp judges by
// (each case's baseline run per GPU model, its history, the stored
// measurements) and stores what it returns (the comparisons, the run's
// verdict); commit-to-commit comparison, and acknowledgement of intended
// slowdowns. The rules themselves are in common.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "kw/common/run_report.hpp"
#include "store/database.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

class DetectionRepository {
 public:
  static std::vector<Statement> statements();

  // Detection in two halves, so the first can run on its own connection while
  // the run is being stored: `plan` reads the baselines and history (earlier
  // runs only) and computes every comparison; `finish` stores them with the
  // run's verdict and returns the verdict.
  struct Plan;
  static std::shared_ptr<const Plan> plan(pqxx::work& tx, const std::string& project,
                                          const common::RunReport& report);
  // Each case's status in the plan: its candidate's time comparison.
  static std::vector<std::pair<std::string, std::string>> case_statuses(const Plan& plan);
  static std::string finish(pqxx::work& tx, std::int64_t run_id, const Plan& plan,
                            const common::RunReport& report);

  // The cases of the newest run of `head` against the newest run of `base`,
  // per GPU model that has both, sorted by effect size: those the filter
  // keeps, one page of them. The decision covers every case the name
  // pattern keeps, whatever the statuses and page show.
  static nlohmann::json compare_commits(pqxx::work& tx, std::int64_t project_id, const std::string& base,
                                        const std::string& head, const CaseFilter& filter, const Page& page);

  // A regression run becomes `pass`, with who and why recorded, and so do
  // the unacknowledged regressions of the same change (same tree, or the
  // merge of that pull request's commit) that it covers. nullopt: no such
  // run; the caller refuses a previous verdict other than "regression".
  struct Acknowledged {
    std::string previous_verdict;
    std::vector<std::int64_t> carried_to;
  };
  static std::optional<Acknowledged> acknowledge(pqxx::work& tx, std::int64_t run_id, const std::string& who,
                                                 const std::string& reason);
  // A new regression run takes the acknowledgement of a run of the same
  // change that covers it: returns that run.
  static std::optional<std::int64_t> carry_acknowledgement(pqxx::work& tx, std::int64_t run_id);
};

}  // namespace kw::server
