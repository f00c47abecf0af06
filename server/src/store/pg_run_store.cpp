#include "store/pg_run_store.hpp"

#include "store/notification_repository.hpp"

#include "store/explanation_repository.hpp"
#include "store/profile_repository.hpp"

namespace kw::server {

std::optional<std::int64_t> PgRunTransaction::find_project(const std::string& name) {
  return RunRepository::find_project(tx_, name);
}

std::optional<std::string> PgRunTransaction::project_of_run(std::int64_t run_id) {
  return RunRepository::project_of_run(tx_, run_id);
}

RunJudgingReads PgRunTransaction::judging_reads(const std::string& project, const common::RunReport& report) {
  return DetectionRepository::run_judging_reads(tx_, project, report);
}

std::optional<StoredRun> PgRunTransaction::find_stored(std::int64_t project_id,
                                                       const std::string& canonical) {
  return RunRepository::find_stored(tx_, project_id, canonical);
}

StoredRun PgRunTransaction::store(std::int64_t project_id, const common::RunReport& report,
                                  const std::vector<common::CaseSummary>& summaries,
                                  const nlohmann::json& document, const std::string& canonical,
                                  std::optional<std::int64_t> job_id) {
  return RunRepository::store(tx_, project_id, report, summaries, document, canonical, job_id);
}

std::string PgRunTransaction::store_judgement(const StoredRun& run, const RunJudgement& judgement) {
  RunRepository::store_cases(tx_, run, judgement.case_statuses());
  return DetectionRepository::store_judgement(tx_, run.run_id, judgement.rows, judgement.settings,
                                              judgement.detection, judgement.verdict);
}

void PgRunTransaction::profile_regression(std::int64_t run_id, int max_attempts) {
  ProfileRepository::after_regression(tx_, run_id, max_attempts);
}

void PgRunTransaction::advance_case_heads(std::int64_t run_id) {
  RunRepository::advance_case_heads(tx_, run_id);
}

void PgRunTransaction::verdict_announced(std::int64_t run_id) {
  NotificationRepository::verdict(tx_, notifications_, run_id);
}

std::optional<RunHead> PgRunTransaction::run_head(std::int64_t run_id, const Page& page) {
  return RunRepository::run_head(tx_, run_id, page);
}

std::string PgRunTransaction::run_comparisons_json(std::int64_t run_id, std::int64_t first,
                                                   std::int64_t end) {
  return RunRepository::run_comparisons_json(tx_, run_id, first, end);
}

std::string PgRunTransaction::run_cases_json(std::int64_t run_id, std::int64_t first, std::int64_t end) {
  return RunRepository::run_cases_json(tx_, run_id, first, end);
}

nlohmann::json PgRunTransaction::explanation(std::int64_t run_id, const std::string& case_name) {
  return *ExplanationRepository::explain(tx_, run_id, case_name);
}

std::optional<Acknowledged> PgRunTransaction::acknowledge(std::int64_t run_id, const std::string& who,
                                                          const std::string& reason) {
  return DetectionRepository::acknowledge(tx_, run_id, who, reason);
}

std::vector<std::string> PgRunTransaction::measured_commits_with_prefix(std::int64_t project_id,
                                                                        const std::string& prefix,
                                                                        int limit) {
  return RunRepository::measured_commits_with_prefix(tx_, project_id, prefix, limit);
}

std::optional<std::string> PgRunTransaction::newest_commit_on_branch(std::int64_t project_id,
                                                                     const std::string& branch) {
  return RunRepository::newest_commit_on_branch(tx_, project_id, branch);
}

std::vector<std::int64_t> PgRunTransaction::projects_with_commit(const std::string& commit) {
  return RunRepository::projects_with_commit(tx_, commit);
}

std::vector<CommitRuns> PgRunTransaction::commit_runs(std::int64_t project_id, const std::string& base,
                                                      const std::string& head, const std::string& gpu_model) {
  return DetectionRepository::commit_runs(tx_, project_id, base, head, gpu_model);
}

std::pair<std::vector<nlohmann::json>, nlohmann::json> PgRunTransaction::judged_times(
    std::int64_t run_id, const std::string& name_like) {
  return DetectionRepository::judged_times(tx_, run_id, name_like);
}

CrossRunReads PgRunTransaction::cross_run_reads(const ProjectSettings& project, const CommitRuns& runs,
                                                const std::string& name_like) {
  return DetectionRepository::cross_run_reads(tx_, project, runs, name_like);
}

void PgRunStore::transact(const std::function<void(RunTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgRunTransaction runs(tx, notifications_);
    work(runs);
  });
}

}  // namespace kw::server
