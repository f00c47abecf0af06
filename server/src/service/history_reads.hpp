// The history routes' reads (a project's overview, cases, runs, branches,
// series and audit), each answer the endpoint's JSON text. kw-server reads
// them from PostgreSQL (PgHistoryReads, store/history_reads.hpp); the
// routes' rules are tested on a stand-in.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/runs.hpp"

namespace kw::server {

class HistoryReads {
 public:
  virtual ~HistoryReads() = default;

  // Each answer is the endpoint's JSON text; nullopt: no such project.
  // The caller's access to the project is checked before any of these.
  virtual std::string projects(const std::optional<std::vector<std::string>>& only) = 0;
  // `branch` empty: the project's default branch.
  virtual std::optional<std::string> overview(const std::string& project, const std::string& branch,
                                              const CaseFilter& filter, const Page& page) = 0;
  virtual std::optional<std::string> cases(const std::string& project) = 0;
  // How often skipping identical cases missed a change, by the audited cases.
  virtual std::optional<std::string> audit(const std::string& project) = 0;
  virtual std::optional<std::string> runs(const std::string& project, const std::string& branch,
                                          const CaseFilter& filter, const Page& page,
                                          bool regressions_only) = 0;
  virtual std::optional<std::string> branches(const std::string& project) = 0;
  virtual std::optional<std::string> series(const std::string& project, const std::string& case_name,
                                            const std::string& gpu, const std::string& branch, int limit) = 0;
};

}  // namespace kw::server
