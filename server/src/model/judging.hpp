// What judging a run reads and decides, as the services and the store
// exchange it: baselines, comparisons as stored, the reads of a run and of
// two stored runs, an acknowledgement's outcome.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "model/settings.hpp"

namespace kw::server {

// The run a case is compared with, and why that one.
struct Baseline {
  std::int64_t run_id = 0;
  std::string commit;
  std::int64_t case_id = 0;
  std::string reason;
};

// A comparison as it is stored: the judge's, with what it was compared with.
struct ComparisonRow : common::Comparison {
  ComparisonRow() = default;
  ComparisonRow(common::Comparison judged, const Baseline* against, std::string source, std::string why)
      : common::Comparison(std::move(judged)),
        baseline(against),
        threshold_source(std::move(source)),
        reason(std::move(why)) {}

  const Baseline* baseline = nullptr;  // outlived by what holds the row
  std::string threshold_source;
  std::string reason;  // what it was compared with (the baseline run's reason by default)

  std::string reason_text() const { return !reason.empty() ? reason : baseline ? baseline->reason : ""; }
  // The first pass's test, without a status: only the run's decision has one.
  nlohmann::json first_pass_json() const;
  nlohmann::json to_json(const common::DetectionSettings& settings) const;
};

// What judging a run reads, each read once: earlier runs only.
struct RunJudgingReads {
  ProjectSettings project;  // defaults, with id 0, for a project not stored
  // Each candidate case's baseline: a pull request's base commit's run on
  // this GPU model where it has one, else the default branch's newest.
  std::map<std::string, Baseline> baselines;
  std::map<std::int64_t, std::vector<common::Measurement>> base_measurements;  // by baseline case id
  std::map<std::string, common::CaseHistory> history;                          // on the default branch
  // Where the report claims cases identical to its base: the base commit's
  // newest stored run on this GPU model, and its cases' fingerprint digests
  // (by case name; a case without one is absent). nullopt: none is stored.
  struct BaseFingerprints {
    std::int64_t run_id = 0;
    std::map<std::string, std::string> digests;
  };
  std::optional<BaseFingerprints> base_fingerprints;
};

// A commit's newest run on one GPU model, with the newest of the base commit's.
struct CommitRuns {
  std::string gpu;
  std::int64_t head_run = 0;
  std::optional<std::int64_t> base_run;
  bool base_in_job = false;   // the head run measured the base in its own job
  int head_rule_version = 0;  // the rule the head run was judged by
};

// What judging two runs of different jobs against each other reads: the
// cases both measured, in the head run's order.
struct CrossRunReads {
  struct Case {
    std::string name;
    std::vector<common::Measurement> head, base;
  };
  std::vector<Case> cases;
  std::map<std::string, common::CaseHistory> history;  // before the head run
  // The threshold the head run judged each case by, and its source.
  std::map<std::string, std::pair<double, std::string>> judged_thresholds;
};

struct Acknowledged {
  std::string previous_verdict;
  std::vector<std::int64_t> carried_to;
};

}  // namespace kw::server
