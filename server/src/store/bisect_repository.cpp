#include "store/bisect_repository.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "store/job_repository.hpp"
#include "store/pg_array.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

constexpr int kMaxAttempts = 3;

struct Bisect {
  std::int64_t id = 0, project_id = 0;
  std::string gpu_class, state;
  std::vector<std::string> commits, cases;
  int good = 0, bad = 0, steps = 0, max_steps = 0;
  std::set<int> skipped;
};

std::vector<std::string> text_array(const pqxx::field& field) {
  std::vector<std::string> out;
  auto parser = field.as_array();
  for (auto item = parser.get_next(); item.first != pqxx::array_parser::juncture::done;
       item = parser.get_next()) {
    if (item.first == pqxx::array_parser::juncture::string_value) out.push_back(item.second);
  }
  return out;
}

std::optional<Bisect> load(pqxx::work& tx, std::int64_t id) {
  pqxx::result rows = tx.exec_params(
      "SELECT project_id, gpu_class, state, commits, cases, good, bad, skipped::text, steps, max_steps "
      "FROM bisects WHERE id = $1 FOR UPDATE",
      id);
  if (rows.empty()) return std::nullopt;
  const pqxx::row& r = rows[0];
  Bisect b;
  b.id = id;
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
  return b;
}

void finish(pqxx::work& tx, const Bisect& b, const std::string& state, const std::string& message) {
  tx.exec_params0(
      "UPDATE bisects SET state = $2, message = $3, first_bad = CASE WHEN $2 = 'found' THEN commits[bad + 1] "
      "END, "
      "updated_at = now() WHERE id = $1",
      b.id, state, message);
}

// Queues the next step, or ends the bisect: the first bad commit is found
// when no untested commit is left between the good end and the bad one.
// Returns true when it ended.
bool next_step(pqxx::work& tx, Bisect& b) {
  std::vector<int> open;
  for (int i = b.good + 1; i < b.bad; ++i) {
    if (!b.skipped.contains(i)) open.push_back(i);
  }
  if (open.empty()) {
    std::string message = "first bad commit " + b.commits[static_cast<std::size_t>(b.bad)].substr(0, 12) +
                          " after " + std::to_string(b.steps) + " step(s)";
    if (b.bad - b.good > 1)
      message += ", or one of the " + std::to_string(b.bad - b.good - 1) +
                 " commit(s) before it that could not be measured";
    finish(tx, b, "found", message);
    return true;
  }
  if (b.steps >= b.max_steps) {
    finish(tx, b, "failed", "gave up after " + std::to_string(b.steps) + " steps (max_steps)");
    return true;
  }
  const double middle = (b.good + b.bad) / 2.0;
  const int mid = *std::min_element(
      open.begin(), open.end(), [&](int x, int y) { return std::abs(x - middle) < std::abs(y - middle); });
  pqxx::row project = tx.exec_params1("SELECT default_branch FROM projects WHERE id = $1", b.project_id);
  NewJob job;
  job.project_id = b.project_id;
  job.commit = b.commits[static_cast<std::size_t>(mid)];
  job.branch = "kernelwatch/bisect-" + std::to_string(b.id);
  job.base_commit = b.commits[static_cast<std::size_t>(b.good)];
  job.gpu_class = b.gpu_class;
  job.max_attempts = kMaxAttempts;
  job.rerun = true;  // its own measurement, whatever else measured that commit
  job.bisect_id = b.id;
  if (job.branch == project[0].as<std::string>()) job.branch += "-step";
  JobRepository::create(tx, job);
  tx.exec_params0("UPDATE bisects SET steps = steps + 1, updated_at = now() WHERE id = $1", b.id);
  ++b.steps;
  return false;
}

void save_bounds(pqxx::work& tx, const Bisect& b) {
  PgArray skipped;
  for (int i : b.skipped) skipped.number(i);
  tx.exec_params0(
      "UPDATE bisects SET good = $2, bad = $3, skipped = $4::integer[], updated_at = now() WHERE id = $1",
      b.id, b.good, b.bad, skipped.str());
}

// A step's commit, judged: bad when any of the bisect's cases regressed
// against the good end; skipped when it did not build.
void judge_step(pqxx::work& tx, Bisect& b, const std::string& commit, std::int64_t run_id) {
  auto at = std::find(b.commits.begin(), b.commits.end(), commit);
  if (at == b.commits.end()) return;
  const int index = static_cast<int>(at - b.commits.begin());
  pqxx::row run = tx.exec_params1(
      "SELECT r.verdict, EXISTS (SELECT 1 FROM stages s WHERE s.run_id = r.id AND s.name = 'build' "
      "                          AND s.status = 'failed') FROM runs r WHERE r.id = $1",
      run_id);
  PgArray cases;
  for (const std::string& c : b.cases) cases.text(c);
  const bool regressed = tx.exec_params1(
                               "SELECT EXISTS (SELECT 1 FROM comparisons WHERE run_id = $1 AND kind = 'time' "
                               "AND impl = 'candidate' "
                               "AND status = 'regression' AND case_name = ANY ($2::text[]))",
                               run_id, cases.str())[0]
                             .as<bool>();
  if (run[1].as<bool>() || (run[0].as<std::string>() == "failed" && !regressed)) {
    b.skipped.insert(index);
  } else if (regressed) {
    b.bad = std::min(b.bad, index);
  } else {
    b.good = std::max(b.good, index);
  }
  save_bounds(tx, b);
}

}  // namespace

BisectAfterRun BisectRepository::after_run(pqxx::work& tx, std::int64_t job_id, std::int64_t run_id) {
  BisectAfterRun result;
  pqxx::row job = tx.exec_params1(
      "SELECT j.bisect_id, j.on_default_branch, j.range_commits, j.gpu_class, j.project_id, r.verdict "
      "FROM jobs j JOIN runs r ON r.id = $2 WHERE j.id = $1",
      job_id, run_id);
  if (!job[0].is_null()) {
    result.step = true;
    auto b = load(tx, job[0].as<std::int64_t>());
    if (!b || b->state != "running") return result;
    pqxx::row commit = tx.exec_params1("SELECT commit_sha FROM runs WHERE id = $1", run_id);
    judge_step(tx, *b, commit[0].as<std::string>(), run_id);
    if (next_step(tx, *b)) result.finished = b->id;
    return result;
  }
  std::vector<std::string> range = text_array(job[2]);
  // The range holds the good end and the pushed commits: more than one pushed.
  if (!job[1].as<bool>() || job[5].as<std::string>() != "regression" || range.size() < 3) return result;
  PgArray commits, cases;
  for (const std::string& c : range) commits.text(c);
  std::size_t flagged = 0;
  for (const auto& row : tx.exec_params(
           "SELECT case_name FROM comparisons WHERE run_id = $1 AND kind = 'time' AND impl = 'candidate' "
           "AND status = 'regression' ORDER BY case_name",
           run_id)) {
    cases.text(row[0].as<std::string>());
    ++flagged;
  }
  if (flagged == 0) return result;
  const int pushed = static_cast<int>(range.size()) - 1;
  // Binary search over the pushed commits, and room for skips.
  const int max_steps = static_cast<int>(std::ceil(std::log2(pushed))) + 4;
  pqxx::result created = tx.exec_params(
      "INSERT INTO bisects (project_id, run_id, gpu_class, commits, cases, good, bad, max_steps) "
      "VALUES ($1, $2, $3, $4::text[], $5::text[], 0, $6, $7) ON CONFLICT (run_id) DO NOTHING RETURNING id",
      job[4].as<std::int64_t>(), run_id, job[3].as<std::string>(), commits.str(), cases.str(), pushed,
      max_steps);
  if (created.empty()) return result;  // the run has its bisect already
  auto b = load(tx, created[0][0].as<std::int64_t>());
  if (next_step(tx, *b)) result.finished = b->id;
  return result;
}

std::optional<std::int64_t> BisectRepository::step_failed(pqxx::work& tx, std::int64_t job_id) {
  pqxx::row job = tx.exec_params1("SELECT bisect_id, commit_sha FROM jobs WHERE id = $1", job_id);
  if (job[0].is_null()) return std::nullopt;
  auto b = load(tx, job[0].as<std::int64_t>());
  if (!b || b->state != "running") return std::nullopt;
  auto at = std::find(b->commits.begin(), b->commits.end(), job[1].as<std::string>());
  if (at != b->commits.end()) b->skipped.insert(static_cast<int>(at - b->commits.begin()));
  save_bounds(tx, *b);
  if (next_step(tx, *b)) return b->id;
  return std::nullopt;
}

std::optional<json> BisectRepository::get(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT json_build_object("
      "  'id', b.id, 'project', p.name, 'run_id', b.run_id, 'gpu_class', b.gpu_class, 'state', b.state,"
      "  'commits', b.commits, 'cases', b.cases, 'good', b.commits[b.good + 1], 'bad', b.commits[b.bad + 1],"
      "  'skipped', (SELECT COALESCE(json_agg(b.commits[s + 1]), '[]') FROM unnest(b.skipped) AS s),"
      "  'first_bad', b.first_bad, 'steps', b.steps, 'max_steps', b.max_steps, 'message', b.message,"
      "  'created_at', b.created_at, 'updated_at', b.updated_at,"
      "  'jobs', (SELECT COALESCE(json_agg(json_build_object('id', j.id, 'commit', j.commit_sha,"
      "             'base_commit', j.base_commit, 'state', j.state, 'run_id', r.id, 'verdict', r.verdict)"
      "             ORDER BY j.id), '[]') FROM jobs j LEFT JOIN runs r ON r.job_id = j.id WHERE j.bisect_id "
      "= b.id)"
      ")::text FROM bisects b JOIN projects p ON p.id = b.project_id WHERE b.id = $1",
      bisect_id);
  if (rows.empty()) return std::nullopt;
  return json::parse(rows[0][0].as<std::string>());
}

std::optional<std::string> BisectRepository::cancel(pqxx::work& tx, std::int64_t bisect_id) {
  auto b = load(tx, bisect_id);
  if (!b) return std::nullopt;
  if (b->state == "running") {
    finish(tx, *b, "cancelled", "cancelled after " + std::to_string(b->steps) + " step(s)");
    tx.exec_params0(
        "UPDATE jobs SET state = 'cancelled', error = 'its bisect was cancelled', updated_at = now() "
        "WHERE bisect_id = $1 AND state = 'queued'",
        bisect_id);
  }
  return b->state;
}

std::optional<std::string> BisectRepository::project_of(pqxx::work& tx, std::int64_t bisect_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT p.name FROM bisects b JOIN projects p ON p.id = b.project_id WHERE b.id = $1", bisect_id);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

}  // namespace kw::server
