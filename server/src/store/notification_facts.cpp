#include "store/notification_facts.hpp"

#include "kw/common/judge.hpp"

namespace kw::server {

ProjectTargets NotificationFacts::targets(pqxx::work& tx, std::int64_t project_id) {
  pqxx::row row = tx.exec_params1(
      "SELECT name, COALESCE(github_repo, ''), COALESCE(webhook_url, ''), COALESCE(gitlab_project, '') "
      "FROM projects WHERE id = $1",
      project_id);
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
          row[3].as<std::string>()};
}

std::int64_t NotificationFacts::project_of_job(pqxx::work& tx, std::int64_t job_id) {
  return tx.exec_params1("SELECT project_id FROM jobs WHERE id = $1", job_id)[0].as<std::int64_t>();
}

VerdictFacts NotificationFacts::verdict(pqxx::work& tx, std::int64_t run_id) {
  pqxx::row run = tx.exec_params1(
      "SELECT r.project_id, r.commit_sha, r.branch, r.verdict, r.gpu_model, r.job_id, "
      "       COALESCE(j.gpu_class, 'any'), COALESCE(r.acknowledged_by, ''), "
      "       COALESCE(r.acknowledged_reason, ''), COALESCE(r.detection, '{}'::jsonb)::text "
      "FROM runs r LEFT JOIN jobs j ON j.id = r.job_id WHERE r.id = $1",
      run_id);
  VerdictFacts facts;
  facts.project_id = run[0].as<std::int64_t>();
  facts.commit = run[1].as<std::string>();
  facts.branch = run[2].as<std::string>();
  facts.verdict = run[3].as<std::string>();
  facts.gpu_model = run[4].as<std::string>();
  if (!run[5].is_null()) facts.job_id = run[5].as<std::int64_t>();
  facts.gpu_class = run[6].as<std::string>();
  facts.acknowledged_by = run[7].as<std::string>();
  facts.acknowledged_reason = run[8].as<std::string>();
  facts.inconclusive_gate = common::inconclusive_gate_text(nlohmann::json::parse(run[9].c_str()));
  for (const auto& row :
       tx.exec_params("SELECT case_name, ratio, lower, upper, kind FROM comparisons "
                      "WHERE run_id = $1 AND kind IN ('time', 'energy') AND impl = 'candidate' "
                      "AND status = 'regression' ORDER BY kind = 'energy', ratio DESC",
                      run_id)) {
    facts.regressions.push_back({row[0].as<std::string>(), row[4].as<std::string>(), row[1].as<double>(),
                                 row[2].as<double>(), row[3].as<double>()});
  }
  if (facts.verdict == "failed") {
    pqxx::result stage = tx.exec_params(
        "SELECT name, message FROM stages WHERE run_id = $1 AND status = 'failed' ORDER BY ordinal LIMIT 1",
        run_id);
    facts.failed_stage = stage.empty() ? "correctness check failed"
                                       : stage[0][0].as<std::string>() + ": " + stage[0][1].as<std::string>();
  }
  pqxx::row counts = tx.exec_params1(
      "SELECT count(*) FILTER (WHERE status <> 'no-baseline'), count(*) FILTER (WHERE status = "
      "'inconclusive') "
      "FROM comparisons WHERE run_id = $1 AND kind = 'time' AND impl = 'candidate'",
      run_id);
  facts.compared = counts[0].as<int>();
  facts.inconclusive = counts[1].as<int>();
  if (facts.verdict == "no-data") {
    pqxx::result skipped = tx.exec_params(
        "SELECT message FROM stages WHERE run_id = $1 AND status = 'skipped' AND name = 'full_bench'",
        run_id);
    if (!skipped.empty()) facts.full_bench_skipped = skipped[0][0].as<std::string>();
  }
  return facts;
}

BisectFacts NotificationFacts::bisect(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::row b = tx.exec_params1(
      "SELECT b.project_id, b.state, COALESCE(b.first_bad, ''), b.run_id, b.gpu_class, "
      "       COALESCE(b.message, ''), b.steps, array_to_string(b.cases, ', '), r.commit_sha "
      "FROM bisects b JOIN runs r ON r.id = b.run_id WHERE b.id = $1",
      bisect_id);
  BisectFacts facts;
  facts.project_id = b[0].as<std::int64_t>();
  facts.state = b[1].as<std::string>();
  facts.first_bad = b[2].as<std::string>();
  facts.run_id = b[3].as<std::int64_t>();
  facts.gpu_class = b[4].as<std::string>();
  facts.message = b[5].as<std::string>();
  facts.steps = b[6].as<int>();
  facts.cases = b[7].as<std::string>();
  facts.commit = b[8].as<std::string>();
  return facts;
}

ProfileFacts NotificationFacts::profile(pqxx::work& tx, std::int64_t job_id) {
  pqxx::row f = tx.exec_params1(
      "SELECT f.project_id, f.id, f.run_id, f.case_name, f.reason, j.state, COALESCE(j.error, ''), "
      "       f.head_commit, COALESCE(f.base_commit, '') "
      "FROM profiles f JOIN jobs j ON j.id = f.job_id WHERE f.job_id = $1",
      job_id);
  return {f[0].as<std::int64_t>(), f[1].as<std::int64_t>(), f[2].as<std::int64_t>(),
          f[3].as<std::string>(),  f[4].as<std::string>(),  f[5].as<std::string>(),
          f[6].as<std::string>(),  f[7].as<std::string>(),  f[8].as<std::string>()};
}

}  // namespace kw::server
