#include "verdict.hpp"

#include "run_repository.hpp"

namespace kw::server {

std::string evaluate_run(pqxx::work& tx, std::int64_t run_id, std::int64_t, const common::RunReport& report) {
  bool failed = false;
  for (const common::Stage& stage : report.stages) failed = failed || stage.status == common::StageStatus::failed;
  for (const common::Case& c : report.cases) failed = failed || (c.correctness && !c.correctness->passed);
  std::string verdict = failed ? "failed" : "pass";
  RunRepository::set_verdict(tx, run_id, verdict);
  return verdict;
}

}  // namespace kw::server
