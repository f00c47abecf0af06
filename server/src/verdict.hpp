// The verdict of a stored run: failed when a preflight stage or a correctness
// check failed, otherwise pass.
#pragma once

#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "database.hpp"
#include "kw/common/run_report.hpp"

namespace kw::server {

class VerdictRepository {
 public:
  static std::vector<Statement> statements() { return {}; }
};

// Computes, stores and returns the run's verdict.
std::string evaluate_run(pqxx::work& tx, std::int64_t run_id, std::int64_t project_id,
                         const common::RunReport& report);

}  // namespace kw::server
