#include "store/profile_repository.hpp"

#include "errors.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

constexpr const char* kProfileRunFacts = R"sql(
SELECT r.project_id, r.commit_sha, r.branch, r.gpu_model, COALESCE(r.device->>'kind', 'gpu'),
       EXISTS (SELECT 1 FROM cases c WHERE c.run_id = r.id AND c.name = $2),
       (SELECT COALESCE(b.commit_sha, r.base_commit)
        FROM comparisons x LEFT JOIN runs b ON b.id = x.baseline_run_id
        WHERE x.run_id = r.id AND x.case_name = $2 AND x.kind = 'time' AND x.impl = 'candidate'
          AND x.status <> 'no-baseline')
FROM runs r WHERE r.id = $1
)sql";

// The same profile asked for again: returned unless it failed or was cancelled.
constexpr const char* kSame = R"sql(
SELECT f.id FROM profiles f JOIN jobs j ON j.id = f.job_id
WHERE f.run_id = $1 AND f.case_name = $2 AND f.base_commit IS NOT DISTINCT FROM $3::char(40)
  AND f.launch_count = $4 AND f.kernel_regex IS NOT DISTINCT FROM $5::text
  AND j.state NOT IN ('failed', 'cancelled')
ORDER BY f.id DESC LIMIT 1
)sql";

constexpr const char* kCreateJob = R"sql(
INSERT INTO jobs (project_id, commit_sha, branch, base_commit, gpu_class, max_attempts, on_default_branch, kind)
SELECT $1, $2, $3, $4::char(40), $5, $6, $3 = p.default_branch, 'profile' FROM projects p WHERE p.id = $1
RETURNING id
)sql";

constexpr const char* kProfileCreate = R"sql(
INSERT INTO profiles (project_id, run_id, job_id, case_name, head_commit, base_commit, reason, requested_by,
                      launch_count, kernel_regex)
VALUES ($1, $2, $3, $4, $5, $6::char(40), $7, $8, $9, $10::text)
RETURNING id
)sql";

constexpr const char* kWorstRegression = R"sql(
SELECT x.case_name FROM comparisons x
WHERE x.run_id = $1 AND x.kind = 'time' AND x.impl = 'candidate' AND x.status = 'regression'
ORDER BY x.ratio DESC, x.case_name LIMIT 1
)sql";

constexpr const char* kProfilerFor = R"sql(
SELECT EXISTS (SELECT 1 FROM agents
               WHERE can_profile AND gpus ? $1 AND last_seen_at > now() - interval '1 day')
)sql";

constexpr const char* kJobOfProfile = R"sql(
SELECT f.id, j.commit_sha, j.base_commit, f.case_name FROM profiles f JOIN jobs j ON j.id = f.job_id
WHERE f.job_id = $1
)sql";

constexpr const char* kStore = R"sql(
UPDATE profiles SET summary = $2::jsonb, base_csv = $3, head_csv = $4, completed_at = now() WHERE id = $1
)sql";

// A profile as the API shows it: its state is its job's.
constexpr const char* kProfileJson = R"sql(
json_build_object(
  'id', f.id, 'project', p.name, 'run_id', f.run_id, 'job_id', f.job_id, 'case', f.case_name,
  'head_commit', f.head_commit, 'base_commit', f.base_commit, 'gpu_model', j.gpu_class,
  'reason', f.reason, 'requested_by', f.requested_by, 'launch_count', f.launch_count,
  'kernel', f.kernel_regex, 'state', j.state, 'error', j.error, 'agent', a.name,
  'created_at', f.created_at, 'completed_at', f.completed_at, 'summary', f.summary,
  'csv', json_build_object('base', f.base_csv IS NOT NULL, 'head', f.head_csv IS NOT NULL))
)sql";

const std::string kProfileGet = std::string("SELECT ") + kProfileJson + R"sql(::text
FROM profiles f JOIN jobs j ON j.id = f.job_id JOIN projects p ON p.id = f.project_id
LEFT JOIN agents a ON a.id = j.agent_id
WHERE f.id = $1
)sql";

const std::string kOfRun =
    std::string("SELECT COALESCE(json_agg(") + kProfileJson + R"sql( ORDER BY f.id DESC), '[]')::text
FROM profiles f JOIN jobs j ON j.id = f.job_id JOIN projects p ON p.id = f.project_id
LEFT JOIN agents a ON a.id = j.agent_id
WHERE f.run_id = $1
)sql";

}  // namespace

std::vector<Statement> ProfileRepository::statements() {
  return {{"profile_run_facts", kProfileRunFacts}, {"profile_same", kSame},
          {"profile_create_job", kCreateJob},      {"profile_create", kProfileCreate},
          {"profile_worst", kWorstRegression},     {"profile_profiler_for", kProfilerFor},
          {"profile_job_of", kJobOfProfile},       {"profile_store", kStore},
          {"profile_get", kProfileGet.c_str()},    {"profile_of_run", kOfRun.c_str()}};
}

std::pair<std::int64_t, bool> ProfileRepository::queue(pqxx::work& tx, const ProfileRequest& request) {
  pqxx::result rows = tx.exec_prepared("profile_run_facts", request.run_id, request.case_name);
  if (rows.empty()) throw NotFound("no_such_run", "no run " + std::to_string(request.run_id));
  const pqxx::row& run = rows[0];
  const auto project_id = run[0].as<std::int64_t>();
  const std::string head = run[1].as<std::string>(), branch = run[2].as<std::string>(),
                    gpu = run[3].as<std::string>();
  if (gpu == "none" || run[4].as<std::string>() == "cpu")
    throw Conflict("not_a_gpu_run", "run " + std::to_string(request.run_id) + " ran on no GPU (" + gpu +
                                        "): there is nothing for Nsight Compute to profile");
  if (!run[5].as<bool>())
    throw Unprocessable(
        "invalid_value", "case",
        "run " + std::to_string(request.run_id) + " has no case \"" + request.case_name + "\"");
  std::optional<std::string> base = request.base_commit;
  if (!base && !run[6].is_null()) base = run[6].as<std::string>();
  if (base && *base == head) base.reset();  // the head against itself says nothing more
  std::optional<std::string> kernel;
  if (!request.kernel_regex.empty()) kernel = request.kernel_regex;
  if (!request.again) {
    pqxx::result same = tx.exec_prepared("profile_same", request.run_id, request.case_name, nullable(base),
                                         request.launch_count, nullable(kernel));
    if (!same.empty()) return {same[0][0].as<std::int64_t>(), false};
  }
  const auto job_id = tx.exec_prepared1("profile_create_job", project_id, head, branch, nullable(base), gpu,
                                        request.max_attempts)[0]
                          .as<std::int64_t>();
  const auto id = tx.exec_prepared1("profile_create", project_id, request.run_id, job_id, request.case_name,
                                    head, nullable(base), request.reason, request.requested_by,
                                    request.launch_count, nullable(kernel))[0]
                      .as<std::int64_t>();
  return {id, true};
}

bool ProfileRepository::profiler_for(pqxx::work& tx, const std::string& gpu_model) {
  return tx.exec_prepared1("profile_profiler_for", gpu_model)[0].as<bool>();
}

std::optional<std::int64_t> ProfileRepository::after_regression(pqxx::work& tx, std::int64_t run_id,
                                                                int max_attempts) {
  pqxx::result worst = tx.exec_prepared("profile_worst", run_id);
  if (worst.empty()) return std::nullopt;  // flagged in energy alone: ncu says nothing of joules
  const std::string gpu =
      tx.exec_params1("SELECT gpu_model FROM runs WHERE id = $1", run_id)[0].as<std::string>();
  if (!profiler_for(tx, gpu)) return std::nullopt;
  ProfileRequest worst_case;
  worst_case.run_id = run_id;
  worst_case.case_name = worst[0][0].as<std::string>();
  worst_case.reason = "worst_regression";
  worst_case.requested_by = "kernelwatch";
  worst_case.max_attempts = max_attempts;
  return queue(tx, worst_case).first;
}

std::optional<ProfileJobFacts> ProfileRepository::job_facts(pqxx::work& tx, std::int64_t job_id) {
  pqxx::result rows = tx.exec_prepared("profile_job_of", job_id);
  if (rows.empty()) return std::nullopt;
  ProfileJobFacts facts;
  facts.profile_id = rows[0][0].as<std::int64_t>();
  facts.head_commit = rows[0][1].as<std::string>();
  if (!rows[0][2].is_null()) facts.base_commit = rows[0][2].as<std::string>();
  facts.case_name = rows[0][3].as<std::string>();
  return facts;
}

void ProfileRepository::store(pqxx::work& tx, std::int64_t profile_id, const ProfileResult& result) {
  std::optional<std::string> base_csv, head_csv;
  if (!result.base_csv.empty()) base_csv = result.base_csv;
  if (!result.head_csv.empty()) head_csv = result.head_csv;
  tx.exec_prepared0("profile_store", profile_id, result.summary.dump(), nullable(base_csv),
                    nullable(head_csv));
}

std::optional<json> ProfileRepository::get(pqxx::work& tx, std::int64_t profile_id) {
  pqxx::result rows = tx.exec_prepared("profile_get", profile_id);
  if (rows.empty()) return std::nullopt;
  return json::parse(rows[0][0].as<std::string>());
}

std::string ProfileRepository::of_run_json(pqxx::work& tx, std::int64_t run_id) {
  return tx.exec_prepared1("profile_of_run", run_id)[0].as<std::string>();
}

std::optional<std::string> ProfileRepository::csv(pqxx::work& tx, std::int64_t profile_id,
                                                  const std::string& side) {
  pqxx::result rows = tx.exec_params(side == "base" ? "SELECT base_csv FROM profiles WHERE id = $1"
                                                    : "SELECT head_csv FROM profiles WHERE id = $1",
                                     profile_id);
  if (rows.empty() || rows[0][0].is_null()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

}  // namespace kw::server
