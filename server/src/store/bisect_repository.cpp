#include "store/bisect_repository.hpp"

#include <vector>

#include "store/job_repository.hpp"
#include "store/pg_array.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

std::vector<std::string> text_array(const pqxx::field& field) {
  std::vector<std::string> out;
  auto parser = field.as_array();
  for (auto item = parser.get_next(); item.first != pqxx::array_parser::juncture::done;
       item = parser.get_next()) {
    if (item.first == pqxx::array_parser::juncture::string_value) out.push_back(item.second);
  }
  return out;
}

std::string text_array_literal(const std::vector<std::string>& items) {
  PgArray array;
  for (const std::string& item : items) array.text(item);
  return array.str();
}

}  // namespace

BisectRunFacts BisectRepository::run_facts(pqxx::work& tx, std::int64_t job_id, std::int64_t run_id) {
  pqxx::row row = tx.exec_params1(
      "SELECT j.bisect_id, j.on_default_branch, j.range_commits, j.gpu_class, j.project_id, r.verdict, "
      "r.commit_sha, EXISTS (SELECT 1 FROM stages s WHERE s.run_id = r.id AND s.name = 'build' "
      "AND s.status = 'failed') "
      "FROM jobs j JOIN runs r ON r.id = $2 WHERE j.id = $1",
      job_id, run_id);
  BisectRunFacts facts;
  if (!row[0].is_null()) facts.bisect_id = row[0].as<std::int64_t>();
  facts.on_default_branch = row[1].as<bool>();
  facts.range = text_array(row[2]);
  facts.gpu_class = row[3].as<std::string>();
  facts.project_id = row[4].as<std::int64_t>();
  facts.verdict = row[5].as<std::string>();
  facts.commit = row[6].as<std::string>();
  facts.build_failed = row[7].as<bool>();
  for (const auto& c : tx.exec_params(
           "SELECT case_name FROM comparisons WHERE run_id = $1 AND kind = 'time' AND impl = 'candidate' "
           "AND status = 'regression' ORDER BY case_name",
           run_id))
    facts.regressed.push_back(c[0].as<std::string>());
  return facts;
}

std::optional<BisectStepJob> BisectRepository::step_job(pqxx::work& tx, std::int64_t job_id) {
  pqxx::row job = tx.exec_params1("SELECT bisect_id, commit_sha FROM jobs WHERE id = $1", job_id);
  if (job[0].is_null()) return std::nullopt;
  return BisectStepJob{job[0].as<std::int64_t>(), job[1].as<std::string>()};
}

std::optional<Bisect> BisectRepository::load(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT project_id, gpu_class, state, commits, cases, good, bad, skipped::text, steps, max_steps, "
      "COALESCE(message, ''), first_bad FROM bisects WHERE id = $1 FOR UPDATE",
      bisect_id);
  if (rows.empty()) return std::nullopt;
  const pqxx::row& r = rows[0];
  Bisect b;
  b.id = bisect_id;
  b.project_id = r[0].as<std::int64_t>();
  b.gpu_class = r[1].as<std::string>();
  b.state = r[2].as<std::string>();
  b.commits = text_array(r[3]);
  b.cases = text_array(r[4]);
  b.good = r[5].as<int>();
  b.bad = r[6].as<int>();
  for (const std::string& n : text_array(r[7])) b.skipped.insert(std::stoi(n));
  b.steps = r[8].as<int>();
  b.max_steps = r[9].as<int>();
  b.message = r[10].as<std::string>();
  if (!r[11].is_null()) b.first_bad = r[11].as<std::string>();
  return b;
}

std::optional<std::int64_t> BisectRepository::create(pqxx::work& tx, const Bisect& b, std::int64_t run_id) {
  pqxx::result created = tx.exec_params(
      "INSERT INTO bisects (project_id, run_id, gpu_class, commits, cases, good, bad, max_steps) "
      "VALUES ($1, $2, $3, $4::text[], $5::text[], $6, $7, $8) ON CONFLICT (run_id) DO NOTHING RETURNING id",
      b.project_id, run_id, b.gpu_class, text_array_literal(b.commits), text_array_literal(b.cases), b.good,
      b.bad, b.max_steps);
  if (created.empty()) return std::nullopt;
  return created[0][0].as<std::int64_t>();
}

void BisectRepository::save(pqxx::work& tx, const Bisect& b) {
  PgArray skipped;
  for (int i : b.skipped) skipped.number(i);
  tx.exec_params0(
      "UPDATE bisects SET good = $2, bad = $3, skipped = $4::integer[], steps = $5, state = $6, "
      "message = NULLIF($7, ''), first_bad = $8, updated_at = now() WHERE id = $1",
      b.id, b.good, b.bad, skipped.str(), b.steps, b.state, b.message, nullable(b.first_bad));
}

std::string BisectRepository::default_branch(pqxx::work& tx, std::int64_t project_id) {
  return tx.exec_params1("SELECT default_branch FROM projects WHERE id = $1", project_id)[0]
      .as<std::string>();
}

void BisectRepository::queue_step(pqxx::work& tx, const NewJob& job) {
  JobRepository::create(tx, job);
}

void BisectRepository::cancel_queued_steps(pqxx::work& tx, std::int64_t bisect_id,
                                           const std::string& reason) {
  tx.exec_params0(
      "UPDATE jobs SET state = 'cancelled', error = $2, updated_at = now() WHERE bisect_id = $1 AND state = "
      "'queued'",
      bisect_id, reason);
}

std::optional<BisectView> BisectRepository::view(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT p.name, b.run_id, to_json(b.created_at) #>> '{}', to_json(b.updated_at) #>> '{}' "
      "FROM bisects b JOIN projects p ON p.id = b.project_id WHERE b.id = $1",
      bisect_id);
  if (rows.empty()) return std::nullopt;
  BisectView view;
  view.bisect = *load(tx, bisect_id);
  view.project = rows[0][0].as<std::string>();
  view.run_id = rows[0][1].as<std::int64_t>();
  view.created_at = rows[0][2].as<std::string>();
  view.updated_at = rows[0][3].as<std::string>();
  for (const auto& step :
       tx.exec_params("SELECT j.id, j.commit_sha, j.base_commit, j.state, r.id, r.verdict FROM jobs j "
                      "LEFT JOIN runs r ON r.job_id = j.id WHERE j.bisect_id = $1 ORDER BY j.id",
                      bisect_id)) {
    BisectStepRow row;
    row.job_id = step[0].as<std::int64_t>();
    row.commit = step[1].as<std::string>();
    row.state = step[3].as<std::string>();
    if (!step[2].is_null()) row.base_commit = step[2].as<std::string>();
    if (!step[4].is_null()) row.run_id = step[4].as<std::int64_t>();
    if (!step[5].is_null()) row.verdict = step[5].as<std::string>();
    view.steps.push_back(std::move(row));
  }
  return view;
}

std::optional<std::string> BisectRepository::project_of(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT p.name FROM bisects b JOIN projects p ON p.id = b.project_id WHERE b.id = $1", bisect_id);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

}  // namespace kw::server
