// What IngestService and RunService read and write: the runs, what judging
// read and decided of each, what a judged run sets off, and the queue's
// operations of the same transaction (a job's report completes its job).
// kw-server keeps them in PostgreSQL (PgRunStore, over the repositories of
// store/); the rules of ingest, verdicts and acknowledgement are tested on
// an in-memory stand-in (server/tests/in_memory_store.hpp), and both pass
// one contract (server/tests/run_store_contract.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "model/jobs.hpp"
#include "model/judging.hpp"
#include "model/runs.hpp"
#include "model/settings.hpp"
#include "service/job_store.hpp"
#include "service/judging.hpp"

namespace kw::server {

// One transaction, as JobTransaction's: kept when the work returns, and
// nothing of it when the work throws.
class RunTransaction {
 public:
  virtual ~RunTransaction() = default;

  // The queue, in this transaction.
  virtual JobTransaction& queue() = 0;

  virtual std::optional<std::int64_t> find_project(const std::string& name) = 0;
  virtual std::optional<std::string> project_of_run(std::int64_t run_id) = 0;

  // What judging `report` reads (DetectionRepository::run_judging_reads):
  // each case's baseline run, its measurements, the case's history.
  virtual RunJudgingReads judging_reads(const std::string& project, const common::RunReport& report) = 0;
  // As RunRepository's functions of the same names.
  virtual std::optional<StoredRun> find_stored(std::int64_t project_id, const std::string& canonical) = 0;
  virtual StoredRun store(std::int64_t project_id, const common::RunReport& report,
                          const std::vector<common::CaseSummary>& summaries, const nlohmann::json& document,
                          const std::string& canonical, std::optional<std::int64_t> job_id) = 0;
  // The run's cases with their status, its comparisons, decision and
  // verdict, as judged; returns the verdict, "pass" where the
  // acknowledgement of a run of the same change covers a regression.
  virtual std::string store_judgement(const StoredRun& run, const RunJudgement& judgement) = 0;

  // What a judged run sets off (besides a bisect moved, through queue()):
  // a regression's worst case profiled, the cases' heads advanced (last: it
  // locks them), and the verdict's notice.
  virtual void profile_regression(std::int64_t run_id, int max_attempts) = 0;
  virtual void advance_case_heads(std::int64_t run_id) = 0;
  virtual void verdict_announced(std::int64_t run_id) = 0;

  // A run as clients read it (RunRepository's JSON documents).
  virtual std::optional<RunHead> run_head(std::int64_t run_id, const Page& page) = 0;
  virtual std::string run_comparisons_json(std::int64_t run_id, std::int64_t first, std::int64_t end) = 0;
  virtual std::string run_cases_json(std::int64_t run_id, std::int64_t first, std::int64_t end) = 0;
  // What changed in a flagged case's launches and build (ExplanationRepository).
  virtual nlohmann::json explanation(std::int64_t run_id, const std::string& case_name) = 0;
  virtual std::optional<Acknowledged> acknowledge(std::int64_t run_id, const std::string& who,
                                                  const std::string& reason) = 0;

  // What a compare of two commits reads (project_id 0: every project).
  virtual std::vector<std::string> measured_commits_with_prefix(std::int64_t project_id,
                                                                const std::string& prefix, int limit) = 0;
  virtual std::optional<std::string> newest_commit_on_branch(std::int64_t project_id,
                                                             const std::string& branch) = 0;
  virtual std::vector<std::int64_t> projects_with_commit(const std::string& commit) = 0;
  virtual std::vector<CommitRuns> commit_runs(std::int64_t project_id, const std::string& base,
                                              const std::string& head, const std::string& gpu_model) = 0;
  virtual std::pair<std::vector<nlohmann::json>, nlohmann::json> judged_times(
      std::int64_t run_id, const std::string& name_like) = 0;
  virtual CrossRunReads cross_run_reads(const ProjectSettings& project, const CommitRuns& runs,
                                        const std::string& name_like) = 0;
};

class RunStore {
 public:
  using Transaction = RunTransaction;
  virtual ~RunStore() = default;
  virtual void transact(const std::function<void(RunTransaction&)>& work) = 0;
  // A write of `project` was committed: this server's next reads of it see
  // the write (its read cache, a replica's reads) without waiting for the
  // change feed.
  virtual void committed(const std::string& project) = 0;
};

}  // namespace kw::server
