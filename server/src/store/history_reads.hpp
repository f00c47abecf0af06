// The reads behind a project's history pages (projects, overview, cases,
// audit, runs, regressions, branches, series) and their SQL, as an interface in the manner of
// openstreetmap-cgimap's data_selection: kw-server reads PostgreSQL through
// PgHistoryReads; the handler tests give the routes a stand-in where a
// database adds nothing (access, parameters, the read cache).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "service/history_reads.hpp"
#include "store/read_routing.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

// Each read one transaction (the series one statement), on the database
// ReadRouting chooses: the read replica where it has the project's writes.
class PgHistoryReads final : public HistoryReads {
 public:
  explicit PgHistoryReads(ReadRouting& routing) : routing_(routing) {}

  // The statements behind the reads (beside them in history_reads.cpp),
  // prepared on every connection of the pools.
  static std::vector<Statement> statements();

  std::string projects(const std::optional<std::vector<std::string>>& only) override;
  std::optional<std::string> overview(const std::string& project, const std::string& branch,
                                      const CaseFilter& filter, const Page& page) override;
  std::optional<std::string> cases(const std::string& project) override;
  std::optional<std::string> audit(const std::string& project) override;
  std::optional<std::string> runs(const std::string& project, const std::string& branch,
                                  const CaseFilter& filter, const Page& page, bool regressions_only) override;
  std::optional<std::string> branches(const std::string& project) override;
  std::optional<std::string> series(const std::string& project, const std::string& case_name,
                                    const std::string& gpu, const std::string& branch, int limit) override;

 private:
  // read(tx, project_id) in one transaction; nullopt when no such project.
  template <typename Read>
  std::optional<std::string> of_project(const std::string& project, Read&& read);

  ReadRouting& routing_;
};

}  // namespace kw::server
