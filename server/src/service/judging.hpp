// Judging: kw/common/judge.hpp's rules applied to every case of a run, or of
// two stored runs, over what the store read for it (store/detection_repository.hpp).
// Pure: nothing here reads or writes the database, so the rules of a
// verdict are tested on hand-made reads (judging_test.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"
#include "model/judging.hpp"
#include "model/runs.hpp"

namespace kw::server {

// What judging a run decided, before the run is stored.
struct RunJudgement {
  std::map<std::string, Baseline> baselines;  // the rows point into it
  common::DetectionSettings settings;
  std::vector<ComparisonRow> rows;
  std::string verdict;       // failed, no-data, regression, improvement or pass
  nlohmann::json detection;  // the run's decision, stored with it

  // Each case's status: its candidate's time comparison.
  std::vector<std::pair<std::string, std::string>> case_statuses() const;
};

// Shared, as the ingest's store step may take it more than once (a retried
// transaction) and the rows must not move from their baselines.
std::shared_ptr<const RunJudgement> judge_run(RunJudgingReads reads, const common::RunReport& report);

// A head run measured against its base in its own job: its comparisons as
// that run judged them (so compare, the run page, the pull request's
// comment and kw gate say the same of every case), paged by effect.
nlohmann::json in_job_comparison(const CommitRuns& runs, std::vector<nlohmann::json> judged_times,
                                 nlohmann::json detection, const CaseFilter& filter, const Page& page);
// Every case of the head run against the base run's, judged as detection
// would judge them, the between-run noise in the interval; paged by effect.
nlohmann::json cross_run_comparison(const ProjectSettings& project, const CommitRuns& runs,
                                    const std::string& base, const CrossRunReads& reads,
                                    const CaseFilter& filter, const Page& page);

}  // namespace kw::server
