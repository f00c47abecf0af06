// Runs and everything under them: ingest of a validated report in one
// transaction, and the read queries (run page, projects, cases, series).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "database.hpp"
#include "kw/common/run_report.hpp"

namespace kw::server {

struct StoredRun {
  std::int64_t run_id = 0;
  bool duplicate = false;  // the same report was stored before
  std::string verdict;
};

class RunRepository {
 public:
  static std::vector<Statement> statements();

  static std::int64_t ensure_project(pqxx::work& tx, const std::string& name);
  static std::optional<std::int64_t> find_project(pqxx::work& tx, const std::string& name);

  // Stores run, stages, cases, launches and raw samples. `document` is the
  // report as validated into `report`; `canonical` its key-sorted text, whose
  // SHA-256 makes a re-post a no-op.
  static StoredRun store(pqxx::work& tx, std::int64_t project_id, const common::RunReport& report,
                         const nlohmann::json& document, const std::string& canonical,
                         std::optional<std::int64_t> job_id);
  // The run already stored from this exact report, if any.
  static std::optional<StoredRun> find_stored(pqxx::work& tx, std::int64_t project_id,
                                              const std::string& canonical);
  static void set_verdict(pqxx::work& tx, std::int64_t run_id, const std::string& verdict);

  // JSON documents (built by PostgreSQL) for the read endpoints.
  static std::optional<std::string> run_json(pqxx::work& tx, std::int64_t run_id);
  static std::string projects_json(pqxx::work& tx);
  static std::string cases_json(pqxx::work& tx, std::int64_t project_id);
  static std::string runs_json(pqxx::work& tx, std::int64_t project_id, const std::string& branch, int limit);
  static std::string overview_json(pqxx::work& tx, std::int64_t project_id, const std::string& branch,
                                   const std::string& gpu_model);
  static std::string series_json(pqxx::work& tx, std::int64_t project_id, const std::string& case_name,
                                 const std::string& gpu_model, const std::string& branch, int limit);
};

// A nullable parameter for libpqxx 6 (which has no std::optional support):
// nullptr binds SQL NULL.
inline const char* nullable(const std::optional<std::string>& value) {
  return value ? value->c_str() : nullptr;
}

}  // namespace kw::server
