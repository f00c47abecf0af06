#include "store/history_reads.hpp"

#include "store/settings_repository.hpp"

namespace kw::server {

template <typename Read>
std::optional<std::string> PgHistoryReads::of_project(const std::string& project, Read&& read) {
  return routing_.run(project, [&](ConnectionPool& pool) {
    return with_transaction(pool, [&](pqxx::work& tx) -> std::optional<std::string> {
      const std::optional<std::int64_t> id = RunRepository::find_project(tx, project);
      if (!id) return std::nullopt;
      return read(tx, *id);
    });
  });
}

std::string PgHistoryReads::projects(const std::optional<std::vector<std::string>>& only) {
  return routing_.run({}, [&](ConnectionPool& pool) {
    return with_transaction(pool, [&](pqxx::work& tx) { return RunRepository::projects_json(tx, only); });
  });
}

std::optional<std::string> PgHistoryReads::overview(const std::string& project, const std::string& branch,
                                                    const CaseFilter& filter, const Page& page) {
  return of_project(project, [&](pqxx::work& tx, std::int64_t id) {
    const std::string on = branch.empty() ? SettingsRepository::get(tx, id).default_branch : branch;
    return RunRepository::overview_json(tx, id, on, filter, page);
  });
}

std::optional<std::string> PgHistoryReads::cases(const std::string& project) {
  return of_project(project,
                    [](pqxx::work& tx, std::int64_t id) { return RunRepository::cases_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::audit(const std::string& project) {
  return of_project(project,
                    [](pqxx::work& tx, std::int64_t id) { return RunRepository::audit_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::runs(const std::string& project, const std::string& branch,
                                                const CaseFilter& filter, const Page& page,
                                                bool regressions_only) {
  return of_project(project, [&](pqxx::work& tx, std::int64_t id) {
    return RunRepository::runs_json(tx, id, branch, filter, page, regressions_only);
  });
}

std::optional<std::string> PgHistoryReads::branches(const std::string& project) {
  return of_project(project,
                    [](pqxx::work& tx, std::int64_t id) { return RunRepository::branches_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::series(const std::string& project, const std::string& case_name,
                                                  const std::string& gpu, const std::string& branch,
                                                  int limit) {
  return routing_.run(project, [&](ConnectionPool& pool) {
    return with_single_statement(pool, [&](pqxx::transaction_base& tx) {
      return RunRepository::series_json(tx, project, case_name, gpu, branch, limit);
    });
  });
}

}  // namespace kw::server
