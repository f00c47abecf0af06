// Runs and everything under them: ingest of a validated report in one
// transaction, and the read queries (run page, projects, cases, series).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "model/runs.hpp"
#include "store/database.hpp"

namespace kw::server {

class RunRepository {
 public:
  static std::vector<Statement> statements();

  // Projects are made by an admin: ensure_project on admin paths (token
  // creation), existing_project_id (404 "no_such_project") on the rest.
  static std::int64_t ensure_project(pqxx::work& tx, const std::string& name);
  static std::int64_t existing_project_id(pqxx::work& tx, const std::string& name);
  static std::optional<std::int64_t> find_project(pqxx::work& tx, const std::string& name);
  static std::string project_name(pqxx::work& tx, std::int64_t project_id);
  // Revisions (project_id 0: of every project): the measured commits that
  // start with `prefix`, the newest measured commit of a branch, and the
  // projects that measured a commit.
  static std::vector<std::string> measured_commits_with_prefix(pqxx::work& tx, std::int64_t project_id,
                                                               const std::string& prefix, int limit);
  static std::optional<std::string> newest_commit_on_branch(pqxx::work& tx, std::int64_t project_id,
                                                            const std::string& branch);
  static std::vector<std::int64_t> projects_with_commit(pqxx::work& tx, const std::string& commit);
  // nullopt when a project of that name exists.
  static std::optional<std::int64_t> create_project(pqxx::work& tx, const std::string& name,
                                                    const std::string& default_branch);
  static std::optional<std::string> project_of_run(pqxx::work& tx, std::int64_t run_id);
  static std::string verdict_of(pqxx::work& tx, std::int64_t run_id);

  // Stores run, stages, launches, measurements and raw samples, with what
  // the rule made of each case (`summaries`, one a case of `report`, from
  // common::summarize_case); the case rows wait for store_cases. `document`
  // is the report as validated into `report`; `canonical` its canonical form
  // (CBOR, keys sorted), whose SHA-256 makes a re-post a no-op.
  static StoredRun store(pqxx::work& tx, std::int64_t project_id, const common::RunReport& report,
                         const std::vector<common::CaseSummary>& summaries, const nlohmann::json& document,
                         const std::string& canonical, std::optional<std::int64_t> job_id);
  // The run's case rows, each with its status (case name, status: its
  // candidate's time comparison; a case not named has none, no-baseline).
  // Written once the run is judged, so a case row is never written twice.
  static void store_cases(pqxx::work& tx, const StoredRun& stored,
                          const std::vector<std::pair<std::string, std::string>>& statuses);
  // The run already stored from this exact report, if any.
  // The run's cases as the newest of their branch and GPU model (the
  // overview's rows); last in the run's transaction, as it locks them.
  static void advance_case_heads(pqxx::work& tx, std::int64_t run_id);
  static std::optional<StoredRun> find_stored(pqxx::work& tx, std::int64_t project_id,
                                              const std::string& canonical);
  static void set_verdict(pqxx::work& tx, std::int64_t run_id, const std::string& verdict);

  // JSON documents (built by PostgreSQL) for the read endpoints. A run is
  // read in parts, so a page of it can be streamed: its head (everything but
  // cases and comparisons, with the "paging" object of `page`, and how many
  // cases the run has; nullopt when there is no such run), then the
  // comparisons and the cases of the case ordinals [first, end), each a JSON
  // array.
  static std::optional<RunHead> run_head(pqxx::work& tx, std::int64_t run_id, const Page& page);
  // `name_like`: an ILIKE pattern the cases' names match ("": every case).
  static std::string run_comparisons_json(pqxx::work& tx, std::int64_t run_id, std::int64_t first,
                                          std::int64_t end, const std::string& name_like = "");
  static std::string run_cases_json(pqxx::work& tx, std::int64_t run_id, std::int64_t first,
                                    std::int64_t end);
};

// A nullable parameter for libpqxx 6 (which has no std::optional support):
// nullptr binds SQL NULL.
inline const char* nullable(const std::optional<std::string>& value) {
  return value ? value->c_str() : nullptr;
}

}  // namespace kw::server
