// Regression detection's store: it reads what judging needs (each case's
// baseline run per GPU model, its history, the stored measurements) and
// stores what judging decided (the comparisons, the run's verdict), with the
// acknowledgement of intended slowdowns. It judges nothing: the rules are in
// kw/common/judge.hpp, applied to a run by service/judging.hpp.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "model/judging.hpp"
#include "store/database.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

class DetectionRepository {
 public:
  static std::vector<Statement> statements();

  static RunJudgingReads run_judging_reads(pqxx::work& tx, const std::string& project,
                                           const common::RunReport& report);
  // Stores the run's comparisons, its decision (`detection`) and verdict;
  // returns the verdict, "pass" where a regression takes the
  // acknowledgement of a run of the same change that covers it.
  static std::string store_judgement(pqxx::work& tx, std::int64_t run_id,
                                     const std::vector<ComparisonRow>& rows,
                                     const common::DetectionSettings& settings,
                                     const nlohmann::json& detection, const std::string& verdict);

  // Per GPU model (only `gpu_model` where not empty), the newest run of `head`.
  static std::vector<CommitRuns> commit_runs(pqxx::work& tx, std::int64_t project_id, const std::string& base,
                                             const std::string& head, const std::string& gpu_model);
  // A run's stored time comparisons as JSON (of the cases `name_like`
  // keeps, case order), and its stored decision.
  static std::pair<std::vector<nlohmann::json>, nlohmann::json> judged_times(pqxx::work& tx,
                                                                             std::int64_t run_id,
                                                                             const std::string& name_like);
  static CrossRunReads cross_run_reads(pqxx::work& tx, const ProjectSettings& project, const CommitRuns& runs,
                                       const std::string& name_like);

  // A regression run becomes `pass`, with who and why recorded, and so do
  // the unacknowledged regressions of the same change (same tree, or the
  // merge of that pull request's commit) that it covers. nullopt: no such
  // run; the caller refuses a previous verdict other than "regression".
  static std::optional<Acknowledged> acknowledge(pqxx::work& tx, std::int64_t run_id, const std::string& who,
                                                 const std::string& reason);
  // A new regression run takes the acknowledgement of a run of the same
  // change that covers it: returns that run.
  static std::optional<std::int64_t> carry_acknowledgement(pqxx::work& tx, std::int64_t run_id);
};

}  // namespace kw::server
