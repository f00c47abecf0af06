// PgRunTransaction, PgRunStore: the run store in PostgreSQL (service/run_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "model/notifications.hpp"
#include "service/judging.hpp"
#include "service/run_store.hpp"
#include "store/database.hpp"
#include "store/detection_repository.hpp"
#include "store/pg_job_store.hpp"
#include "store/read_routing.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

class PgRunTransaction final : public RunTransaction {
 public:
  PgRunTransaction(pqxx::work& tx, const NotifierOptions& notifications)
      : tx_(tx), notifications_(notifications), queue_(tx, notifications) {}

  JobTransaction& queue() override { return queue_; }
  std::optional<std::int64_t> find_project(const std::string& name) override;
  std::optional<std::string> project_of_run(std::int64_t run_id) override;
  RunJudgingReads judging_reads(const std::string& project, const common::RunReport& report) override;
  std::optional<StoredRun> find_stored(std::int64_t project_id, const std::string& canonical) override;
  StoredRun store(std::int64_t project_id, const common::RunReport& report,
                  const std::vector<common::CaseSummary>& summaries, const nlohmann::json& document,
                  const std::string& canonical, std::optional<std::int64_t> job_id) override;
  std::string store_judgement(const StoredRun& run, const RunJudgement& judgement) override;
  void profile_regression(std::int64_t run_id, int max_attempts) override;
  void advance_case_heads(std::int64_t run_id) override;
  void verdict_announced(std::int64_t run_id) override;
  std::optional<RunHead> run_head(std::int64_t run_id, const Page& page) override;
  std::string run_comparisons_json(std::int64_t run_id, std::int64_t first, std::int64_t end) override;
  std::string run_cases_json(std::int64_t run_id, std::int64_t first, std::int64_t end) override;
  nlohmann::json explanation(std::int64_t run_id, const std::string& case_name) override;
  std::optional<Acknowledged> acknowledge(std::int64_t run_id, const std::string& who,
                                          const std::string& reason) override;
  std::vector<std::string> measured_commits_with_prefix(std::int64_t project_id, const std::string& prefix,
                                                        int limit) override;
  std::optional<std::string> newest_commit_on_branch(std::int64_t project_id,
                                                     const std::string& branch) override;
  std::vector<std::int64_t> projects_with_commit(const std::string& commit) override;
  std::vector<CommitRuns> commit_runs(std::int64_t project_id, const std::string& base,
                                      const std::string& head, const std::string& gpu_model) override;
  std::pair<std::vector<nlohmann::json>, nlohmann::json> judged_times(std::int64_t run_id,
                                                                      const std::string& name_like) override;
  CrossRunReads cross_run_reads(const ProjectSettings& project, const CommitRuns& runs,
                                const std::string& name_like) override;

 private:
  pqxx::work& tx_;
  const NotifierOptions& notifications_;
  PgJobTransaction queue_;
};

class PgRunStore final : public RunStore {
 public:
  PgRunStore(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications)
      : pool_(pool), reads_(reads), notifications_(notifications) {}

  // Retried whole on a serialization failure or a lost connection (with_transaction).
  void transact(const std::function<void(RunTransaction&)>& work) override;
  void committed(const std::string& project) override { reads_.committed(project); }

 private:
  ConnectionPool& pool_;
  ReadRouting& reads_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
