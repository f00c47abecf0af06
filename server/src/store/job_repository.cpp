#include "store/job_repository.hpp"

#include <algorithm>
#include <cstdio>

#include "errors.hpp"
#include "store/pg_array.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

// The newest measurement of a commit on its side (the default branch or
// not) and GPU class.
constexpr const char* kLatest = R"sql(
SELECT j.id, j.rerun FROM jobs j JOIN projects p ON p.id = j.project_id
WHERE j.project_id = $1 AND j.commit_sha = $2 AND j.gpu_class = $4 AND j.kind = 'measure'
  AND j.on_default_branch = ($3 = p.default_branch)
ORDER BY j.rerun DESC LIMIT 1
)sql";

// Two submits racing for the same measurement get the same job.
constexpr const char* kCreate = R"sql(
INSERT INTO jobs (project_id, commit_sha, branch, base_commit, pr, gpu_class, max_attempts, rerun,
                  on_default_branch, range_commits, bisect_id, token_id)
SELECT $1, $2, $3, $4, $5::integer, $6, $7, $8, $3 = p.default_branch, $9::text[], $10::bigint, $11::bigint
FROM projects p WHERE p.id = $1
ON CONFLICT (project_id, commit_sha, gpu_class, on_default_branch, rerun) WHERE kind = 'measure'
  DO UPDATE SET updated_at = jobs.updated_at
RETURNING id, (xmax = 0) AS created
)sql";

constexpr const char* kGet = R"sql(
SELECT json_build_object(
  'id', j.id, 'project', p.name, 'commit', j.commit_sha, 'branch', j.branch, 'base_commit', j.base_commit,
  'pr', j.pr, 'gpu_class', j.gpu_class, 'state', j.state, 'attempts', j.attempts,
  'max_attempts', j.max_attempts, 'agent', a.name, 'lease_expires_at', j.lease_expires_at, 'error', j.error,
  'created_at', j.created_at, 'updated_at', j.updated_at, 'rerun', j.rerun,
  'on_default_branch', j.on_default_branch, 'range', j.range_commits, 'bisect_id', j.bisect_id,
  'run_id', r.id, 'verdict', r.verdict, 'kind', j.kind, 'shards', j.shards,
  'shard', CASE WHEN j.kind = 'shard' THEN json_build_object(
             'index', j.shard_index, 'count', (SELECT pj.shards FROM jobs pj WHERE pj.id = j.parent_job_id),
             'job_id', j.parent_job_id) END,
  'shard_jobs', CASE WHEN j.shards > 1 THEN (
    SELECT json_agg(json_build_object(
             'index', c.shard_index, 'id', c.id, 'state', c.state, 'attempts', c.attempts, 'agent', ca.name,
             'gpu', ca.gpu, 'error', c.error, 'updated_at', c.updated_at,
             'cases', jsonb_array_length(c.shard_report->'cases'),
             'stages', (SELECT COALESCE(json_agg(json_build_object(
                          'name', s.name, 'status', s.status, 'duration_ms', s.duration_ms, 'message', s.message,
                          'log_tail', CASE WHEN s.status = 'failed' THEN s.log_tail ELSE '' END)
                          ORDER BY s.ordinal), '[]')
                        FROM job_stages s WHERE s.job_id = c.id AND s.attempt = c.attempts))
           ORDER BY c.shard_index)
    FROM jobs c LEFT JOIN agents ca ON ca.id = c.agent_id WHERE c.parent_job_id = j.id) END,
  'cases', (SELECT b.cases FROM bisects b WHERE b.id = j.bisect_id),
  'profile', (SELECT json_build_object('id', f.id, 'run_id', f.run_id, 'case', f.case_name,
                                       'launch_count', f.launch_count, 'kernel', f.kernel_regex)
              FROM profiles f WHERE f.job_id = j.id),
  'measured_on_other_side', (
    SELECT json_build_object('job_id', o.id, 'branch', o.branch, 'pr', o.pr, 'run_id', ro.id,
                             'verdict', ro.verdict)
    FROM jobs o LEFT JOIN runs ro ON ro.job_id = o.id
    WHERE o.project_id = j.project_id AND o.commit_sha = j.commit_sha AND o.gpu_class = j.gpu_class
      AND o.on_default_branch <> j.on_default_branch AND o.kind = 'measure' AND j.kind = 'measure'
    ORDER BY o.id DESC LIMIT 1),
  'stages', (SELECT COALESCE(json_agg(json_build_object(
                 'name', s.name, 'status', s.status, 'duration_ms', s.duration_ms, 'gpu_seconds', s.gpu_seconds,
                 'message', s.message, 'log_tail', s.log_tail, 'updated_at', s.updated_at) ORDER BY s.ordinal), '[]')
             FROM job_stages s WHERE s.job_id = j.id AND s.attempt = j.attempts))::text
FROM jobs j
JOIN projects p ON p.id = j.project_id
LEFT JOIN agents a ON a.id = j.agent_id
LEFT JOIN runs r ON r.job_id = j.id
WHERE j.id = $1
)sql";

// An agent belongs to the token that registered it ($2: its id). A token
// that replaces a revoked one of the same name, scope and projects takes
// over that token's agent of this name (the newest, should there be several).
constexpr const char* kRefreshAgent = R"sql(
UPDATE agents SET host = $3, version = $4, last_seen_at = now(),
                  gpus = CASE WHEN $5::jsonb = '[]' THEN gpus ELSE $5::jsonb END
WHERE token_id = $2 AND name = $1
RETURNING id
)sql";

constexpr const char* kTakeOverAgent = R"sql(
UPDATE agents SET token_id = $2, token_name = $3, last_seen_at = now()
WHERE id = (
  SELECT a.id FROM agents a JOIN api_tokens t ON t.id = a.token_id
  WHERE a.name = $1 AND t.revoked_at IS NOT NULL AND t.name = $3 AND t.scope = $4
    AND (SELECT array_agg(p ORDER BY p) FROM unnest(t.projects) p)
        IS NOT DISTINCT FROM (SELECT array_agg(p ORDER BY p) FROM unnest($5::text[]) p)
  ORDER BY a.id DESC LIMIT 1)
RETURNING id
)sql";

constexpr const char* kInsertAgent = R"sql(
INSERT INTO agents (name, token_id, token_name, host, version, gpus)
VALUES ($1, $2, $3, $4, $5, $6::jsonb)
ON CONFLICT (token_id, name) DO UPDATE SET last_seen_at = now()
RETURNING id
)sql";

constexpr const char* kRecordWorker = R"sql(
UPDATE agents SET gpu = $2::jsonb, health = $3::jsonb, can_profile = $4 WHERE id = $1
)sql";

// Every agent with what it runs now ($1: the projects whose jobs the caller
// may see; NULL: all). `state`: running, unhealthy (its last health check
// failed), offline (not seen for 10 minutes), else idle.
constexpr const char* kAgentsJson = R"sql(
SELECT COALESCE(json_agg(json_build_object(
  'name', a.name, 'host', a.host, 'version', a.version, 'gpus', a.gpus, 'gpu', a.gpu, 'health', a.health,
  'registered_at', a.registered_at, 'last_seen_at', a.last_seen_at,
  'state', CASE WHEN j.id IS NOT NULL THEN 'running'
                WHEN a.health->>'healthy' = 'false' THEN 'unhealthy'
                WHEN a.last_seen_at < now() - interval '10 minutes' THEN 'offline'
                ELSE 'idle' END,
  'job', CASE WHEN j.id IS NULL THEN NULL
              ELSE json_build_object('id', j.id, 'project', j.project, 'commit', j.commit_sha, 'branch', j.branch,
                                     'kind', j.kind)
         END, 'can_profile', a.can_profile) ORDER BY a.name), '[]')::text
FROM agents a
LEFT JOIN api_tokens t ON t.id = a.token_id
LEFT JOIN LATERAL (
  SELECT j.id, p.name AS project, j.commit_sha, j.branch, j.kind FROM jobs j JOIN projects p ON p.id = j.project_id
  WHERE j.agent_id = a.id AND j.state = 'running' AND ($1::text[] IS NULL OR p.name = ANY ($1::text[]))
  ORDER BY j.id DESC LIMIT 1) j ON true
-- A token scoped to projects sees the agents that may run their jobs: those
-- whose token names one of them, or no project (every project).
WHERE $1::text[] IS NULL OR t.projects IS NULL OR t.projects && $1::text[]
)sql";

// The oldest queued job of the token's projects ($4, NULL: all) that one of
// the agent's GPUs can run; a profile only for an agent with ncu ($5), and
// after the measurements, which gate merges.
constexpr const char* kClaim = R"sql(
UPDATE jobs
SET state = 'running', agent_id = $1, attempts = attempts + 1,
    lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
WHERE id = (
  SELECT id FROM jobs
  WHERE state = 'queued'
    AND (gpu_class = 'any' OR gpu_class IN (SELECT jsonb_array_elements_text($2::jsonb)))
    AND ($4::text[] IS NULL OR project_id IN (SELECT id FROM projects WHERE name = ANY ($4::text[])))
    AND (kind <> 'profile' OR $5)
  ORDER BY kind = 'profile', id
  FOR UPDATE SKIP LOCKED
  LIMIT 1)
RETURNING id
)sql";

constexpr const char* kRequeueExpired = R"sql(
UPDATE jobs
SET state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
    error = CASE WHEN attempts >= max_attempts
                 THEN 'lease expired ' || attempts || ' times; giving up' ELSE error END,
    agent_id = NULL, lease_expires_at = NULL, updated_at = now()
WHERE state = 'running' AND lease_expires_at < now()
RETURNING id, state, kind, parent_job_id
)sql";

// A sharded job and its shards as jobs: the shards inherit what the job
// measures, and the job itself is never claimed.
constexpr const char* kSplit = R"sql(
WITH parent AS (
  UPDATE jobs SET shards = $2, state = 'running', updated_at = now() WHERE id = $1
  RETURNING id, project_id, commit_sha, branch, base_commit, pr, gpu_class, max_attempts, rerun,
            on_default_branch)
INSERT INTO jobs (project_id, commit_sha, branch, base_commit, pr, gpu_class, max_attempts, rerun,
                  on_default_branch, kind, parent_job_id, shard_index)
SELECT project_id, commit_sha, branch, base_commit, pr, gpu_class, max_attempts, rerun, on_default_branch,
       'shard', id, k
FROM parent, generate_series(1, $2) AS k
)sql";

// The first shard claimed picks the GPU model of them all ($2, exactly one,
// whatever the claim listed): a run is judged against one model's history.
constexpr const char* kPinShards = R"sql(
UPDATE jobs SET gpu_class = $2, updated_at = now()
WHERE parent_job_id = (SELECT parent_job_id FROM jobs WHERE id = $1 AND kind = 'shard')
  AND kind = 'shard' AND gpu_class = 'any'
)sql";

// The first queued shard of each sharded job whose shards, pinned to one
// GPU model by its first claim, have waited longer than $1 minutes since.
constexpr const char* kStrandedShards = R"sql(
SELECT DISTINCT ON (parent_job_id) id, parent_job_id, shard_index, gpu_class FROM jobs
WHERE kind = 'shard' AND state = 'queued' AND gpu_class <> 'any'
  AND updated_at < now() - make_interval(mins => $1)
  AND parent_job_id NOT IN (SELECT parent_job_id FROM jobs WHERE id = ANY ($2::bigint[]))
ORDER BY parent_job_id, shard_index
)sql";

// The project's audited cases on a GPU model (cases_audited, schema 033, serves it: the
// audited rows alone, a few in a hundred of a pull request's cases).
constexpr const char* kAuditedCases = R"sql(
SELECT count(*) FROM cases c JOIN runs r ON r.id = c.run_id
WHERE c.project_id = $1 AND c.audit AND r.gpu_model = $2
)sql";

constexpr const char* kQueuedShardsOfToken = R"sql(
SELECT count(*) FROM jobs c JOIN jobs p ON p.id = c.parent_job_id
WHERE c.kind = 'shard' AND c.state = 'queued' AND p.token_id = $1 AND p.state = 'running' AND p.shards > 1
)sql";

constexpr const char* kFailShardGroup = R"sql(
UPDATE jobs SET state = 'failed', error = $2, lease_expires_at = NULL, updated_at = now()
WHERE (id = (SELECT parent_job_id FROM jobs WHERE id = $1) OR parent_job_id = (SELECT parent_job_id FROM jobs WHERE id = $1))
  AND state IN ('queued', 'running') AND id <> $1
)sql";

constexpr const char* kShardProgress = R"sql(
SELECT c.shard_index, c.state, c.shard_report::text FROM jobs c WHERE c.parent_job_id = $1 ORDER BY c.shard_index
)sql";

constexpr const char* kMergePending = R"sql(
SELECT j.id FROM jobs j
WHERE j.shards > 1 AND j.kind = 'measure' AND j.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = j.id AND c.kind = 'shard' AND c.state <> 'done')
  AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.id)
)sql";

constexpr const char* kHeartbeat = R"sql(
UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
WHERE id = $1 AND state = 'running' AND agent_id = $2
RETURNING id
)sql";

constexpr const char* kRelease = R"sql(
UPDATE jobs SET state = 'queued', agent_id = NULL, lease_expires_at = NULL,
                attempts = GREATEST(attempts - 1, 0), updated_at = now()
WHERE id = $1 AND state = 'running' AND agent_id = $2
RETURNING id
)sql";

constexpr const char* kFail = R"sql(
UPDATE jobs SET state = 'failed', error = $3, lease_expires_at = NULL, updated_at = now()
WHERE id = $1 AND state = 'running' AND agent_id = $2
RETURNING id
)sql";

// Only the holder of a running job records its stages; the lease is renewed
// in the same statement.
constexpr const char* kRecordStage = R"sql(
WITH held AS (
  UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
  WHERE id = $1 AND state = 'running' AND agent_id = $2
  RETURNING id, attempts
)
INSERT INTO job_stages (job_id, attempt, name, ordinal, status, duration_ms, gpu_seconds, message, log_tail)
SELECT id, attempts, $4, $5, $6, $7::bigint, $8::float8, $9, $10 FROM held
ON CONFLICT (job_id, attempt, name) DO UPDATE
  SET status = EXCLUDED.status, duration_ms = EXCLUDED.duration_ms, gpu_seconds = EXCLUDED.gpu_seconds,
      message = EXCLUDED.message, log_tail = EXCLUDED.log_tail, updated_at = now()
RETURNING job_id
)sql";

}  // namespace

std::vector<Statement> JobRepository::statements() {
  return {{"job_latest", kLatest},
          {"job_create", kCreate},
          {"job_get", kGet},
          {"agent_refresh", kRefreshAgent},
          {"agent_take_over", kTakeOverAgent},
          {"agent_insert", kInsertAgent},
          {"agent_worker", kRecordWorker},
          {"agents_json", kAgentsJson},
          {"job_claim", kClaim},
          {"job_requeue", kRequeueExpired},
          {"job_heartbeat", kHeartbeat},
          {"job_release", kRelease},
          {"job_record_stage", kRecordStage},
          {"job_fail", kFail},
          {"job_split", kSplit},
          {"job_pin_shards", kPinShards},
          {"job_stranded_shards", kStrandedShards},
          {"job_queued_shards_of_token", kQueuedShardsOfToken},
          {"job_audited_cases", kAuditedCases},
          {"job_fail_shard_group", kFailShardGroup},
          {"job_shard_progress", kShardProgress},
          {"job_merge_pending", kMergePending}};
}

std::pair<std::int64_t, bool> JobRepository::create(pqxx::work& tx, const NewJob& job) {
  std::optional<std::string> pr;
  if (job.pr) pr = std::to_string(*job.pr);
  pqxx::result latest = tx.exec_prepared("job_latest", job.project_id, job.commit, job.branch, job.gpu_class);
  if (!latest.empty() && !job.rerun) return {latest[0][0].as<std::int64_t>(), false};
  const int rerun = latest.empty() ? 0 : latest[0][1].as<int>() + 1;
  PgArray range;
  for (const std::string& commit : job.range) range.text(commit);
  std::optional<std::string> bisect, token;
  if (job.bisect_id) bisect = std::to_string(*job.bisect_id);
  if (job.token_id) token = std::to_string(*job.token_id);
  pqxx::row row = tx.exec_prepared1("job_create", job.project_id, job.commit, job.branch,
                                    nullable(job.base_commit), nullable(pr), job.gpu_class, job.max_attempts,
                                    rerun, range.str(), nullable(bisect), nullable(token));
  const auto id = row[0].as<std::int64_t>();
  const bool created = row[1].as<bool>();
  if (created && job.shards > 1) tx.exec_prepared0("job_split", id, job.shards);
  return {id, created};
}

std::optional<nlohmann::json> JobRepository::get(pqxx::work& tx, std::int64_t job_id) {
  pqxx::result rows = tx.exec_prepared("job_get", job_id);
  if (rows.empty()) return std::nullopt;
  return nlohmann::json::parse(rows[0][0].c_str());
}

std::int64_t JobRepository::bind_agent(pqxx::work& tx, const std::string& name, const Caller& caller,
                                       const std::string& host, const std::string& version,
                                       const nlohmann::json& gpus) {
  const std::string gpu_list = gpus.dump();
  pqxx::result rows = tx.exec_prepared("agent_refresh", name, caller.token_id, host, version, gpu_list);
  if (rows.empty()) {
    rows = tx.exec_prepared("agent_take_over", name, caller.token_id, caller.token_name,
                            std::string(to_string(caller.scope)), nullable(text_array(caller.projects)));
    if (!rows.empty())
      rows = tx.exec_prepared("agent_refresh", name, caller.token_id, host, version, gpu_list);
  }
  if (rows.empty())
    rows =
        tx.exec_prepared("agent_insert", name, caller.token_id, caller.token_name, host, version, gpu_list);
  return rows[0][0].as<std::int64_t>();
}

void JobRepository::record_worker(pqxx::work& tx, std::int64_t agent_id,
                                  const std::optional<nlohmann::json>& gpu,
                                  const std::optional<nlohmann::json>& health, bool can_profile) {
  tx.exec_prepared0("agent_worker", agent_id, nullable(gpu ? std::optional(gpu->dump()) : std::nullopt),
                    nullable(health ? std::optional(health->dump()) : std::nullopt), can_profile);
}

std::string JobRepository::agents_json(pqxx::work& tx,
                                       const std::optional<std::vector<std::string>>& projects) {
  return tx.exec_prepared1("agents_json", nullable(text_array(projects)))[0].as<std::string>();
}

std::int64_t JobRepository::registered_agent(pqxx::work& tx, const std::string& name, const Caller& caller) {
  pqxx::result rows =
      tx.exec_params("SELECT id FROM agents WHERE name = $1 AND token_id = $2", name, caller.token_id);
  if (rows.empty()) {
    throw Conflict("agent_not_registered", "agent \"" + name + "\" is not registered under token \"" +
                                               caller.token_name + "\"; claim a job first");
  }
  return rows[0][0].as<std::int64_t>();
}

std::optional<std::int64_t> JobRepository::claim(pqxx::work& tx, std::int64_t agent_id,
                                                 const nlohmann::json& gpu_models, double lease_seconds,
                                                 const std::optional<std::vector<std::string>>& projects,
                                                 bool can_profile) {
  pqxx::result rows = tx.exec_prepared("job_claim", agent_id, gpu_models.dump(), lease_seconds,
                                       nullable(text_array(projects)), can_profile);
  if (rows.empty()) return std::nullopt;
  const auto job_id = rows[0][0].as<std::int64_t>();
  // A fresh attempt: what an earlier holder streamed is no progress of this one.
  tx.exec_params0("DELETE FROM job_stages WHERE job_id = $1", job_id);
  // An agent whose GPUs are of several models pins its first: it claims for
  // one worker, whose GPU it names first.
  if (gpu_models.is_array() && !gpu_models.empty() && gpu_models[0].is_string())
    tx.exec_prepared0("job_pin_shards", job_id, gpu_models[0].get<std::string>());
  return job_id;
}

ExpiredLeases JobRepository::requeue_expired(pqxx::work& tx) {
  ExpiredLeases expired;
  for (const auto& row : tx.exec_prepared("job_requeue")) {
    const auto id = row[0].as<std::int64_t>();
    if (row[1].as<std::string>() != "failed")
      ++expired.requeued;
    else if (row[2].as<std::string>() == "shard")
      expired.failed_shards.push_back({id, "its lease expired on every attempt"});
    else
      expired.failed.push_back(id);
  }
  fail_stranded_shards(tx, expired);
  return expired;
}

void JobRepository::fail_stranded_shards(pqxx::work& tx, ExpiredLeases& expired) {
  // A job whose shard just ran out of attempts fails for that shard.
  PgArray failing;
  for (const FailedShard& shard : expired.failed_shards) failing.number(shard.shard_job_id);
  for (const auto& row : tx.exec_prepared("job_stranded_shards", kPinnedShardWaitMinutes, failing.str())) {
    const auto id = row[0].as<std::int64_t>();
    const std::string reason = "it waited " + std::to_string(kPinnedShardWaitMinutes) +
                               " minutes for an agent with a " + row[3].as<std::string>() +
                               " GPU, the model the job's first shard was measured on; none claimed it";
    tx.exec_params0("UPDATE jobs SET state = 'failed', error = $2, updated_at = now() WHERE id = $1", id,
                    "shard " + row[2].as<std::string>() + ": " + reason);
    expired.failed_shards.push_back({id, reason});
  }
}

std::int64_t JobRepository::audited_cases(pqxx::work& tx, std::int64_t project_id,
                                          const std::string& gpu_model) {
  return tx.exec_prepared1("job_audited_cases", project_id, gpu_model)[0].as<std::int64_t>();
}

std::int64_t JobRepository::queued_shards_of_token(pqxx::work& tx, std::int64_t token_id) {
  return tx.exec_prepared1("job_queued_shards_of_token", token_id)[0].as<std::int64_t>();
}

bool JobRepository::heartbeat(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id,
                              double lease_seconds) {
  return !tx.exec_prepared("job_heartbeat", job_id, agent_id, lease_seconds).empty();
}

bool JobRepository::release(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id) {
  return !tx.exec_prepared("job_release", job_id, agent_id).empty();
}

bool JobRepository::fail(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id,
                         const std::string& reason) {
  return !tx.exec_prepared("job_fail", job_id, agent_id, reason).empty();
}

void JobRepository::fail_shard_group(pqxx::work& tx, std::int64_t shard_job_id, const std::string& error) {
  tx.exec_prepared0("job_fail_shard_group", shard_job_id, error);
}

void JobRepository::store_shard_report(pqxx::work& tx, std::int64_t shard_job_id,
                                       const nlohmann::json& report) {
  tx.exec_params0(
      "UPDATE jobs SET shard_report = $2::jsonb, state = 'done', lease_expires_at = NULL, updated_at = now() "
      "WHERE id = $1",
      shard_job_id, report.dump());
}

std::optional<nlohmann::json> JobRepository::shard_report(pqxx::work& tx, std::int64_t shard_job_id) {
  pqxx::result rows = tx.exec_params("SELECT shard_report::text FROM jobs WHERE id = $1", shard_job_id);
  if (rows.empty() || rows[0][0].is_null()) return std::nullopt;
  return nlohmann::json::parse(rows[0][0].c_str());
}

ShardProgress JobRepository::shard_progress(pqxx::work& tx, std::int64_t job_id) {
  ShardProgress progress;
  pqxx::row job =
      tx.exec_params1("SELECT state, COALESCE(error, '') FROM jobs WHERE id = $1 FOR UPDATE", job_id);
  progress.state = job[0].as<std::string>();
  progress.error = job[1].as<std::string>();
  for (const auto& row : tx.exec_prepared("job_shard_progress", job_id)) {
    if (row[1].as<std::string>() != "done" || row[2].is_null())
      progress.waiting_for.push_back(row[0].as<std::int64_t>());
    else
      progress.reports.emplace_back(row[2].c_str(), row[2].size());
  }
  if (!progress.waiting_for.empty()) progress.reports.clear();
  return progress;
}

bool JobRepository::fail_unmerged(pqxx::work& tx, std::int64_t job_id, const std::string& reason) {
  return !tx.exec_params(
                "UPDATE jobs SET state = 'failed', error = $2, updated_at = now() "
                "WHERE id = $1 AND state = 'running' AND shards > 1 RETURNING id",
                job_id, reason)
              .empty();
}

std::vector<std::int64_t> JobRepository::merge_pending(pqxx::work& tx) {
  std::vector<std::int64_t> ids;
  for (const auto& row : tx.exec_prepared("job_merge_pending")) ids.push_back(row[0].as<std::int64_t>());
  return ids;
}

bool JobRepository::record_stage(pqxx::work& tx, std::int64_t job_id, std::int64_t agent_id,
                                 double lease_seconds, const StageProgress& stage) {
  std::optional<std::string> duration, gpu;
  if (stage.duration_ms) duration = std::to_string(*stage.duration_ms);
  if (stage.gpu_seconds) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", *stage.gpu_seconds);
    gpu = text;
  }
  return !tx.exec_prepared("job_record_stage", job_id, agent_id, lease_seconds, stage.name, stage.ordinal,
                           stage.status, nullable(duration), nullable(gpu), stage.message, stage.log_tail)
              .empty();
}

std::optional<JobHold> JobRepository::lock(pqxx::work& tx, std::int64_t job_id) {
  pqxx::result rows = tx.exec_params(
      "SELECT j.id, j.project_id, j.commit_sha, j.state, j.agent_id, j.kind, j.parent_job_id, "
      "COALESCE(j.shard_index, 0), COALESCE(p.shards, j.shards) "
      "FROM jobs j LEFT JOIN jobs p ON p.id = j.parent_job_id WHERE j.id = $1 FOR UPDATE OF j",
      job_id);
  if (rows.empty()) return std::nullopt;
  JobHold hold;
  hold.job_id = rows[0][0].as<std::int64_t>();
  hold.project_id = rows[0][1].as<std::int64_t>();
  hold.commit = rows[0][2].as<std::string>();
  hold.state = rows[0][3].as<std::string>();
  hold.kind = rows[0][5].as<std::string>();
  if (!rows[0][4].is_null()) hold.agent_id = rows[0][4].as<std::int64_t>();
  if (!rows[0][6].is_null()) hold.parent_job_id = rows[0][6].as<std::int64_t>();
  hold.shard_index = rows[0][7].as<std::int64_t>();
  hold.shards = rows[0][8].as<std::int64_t>();
  return hold;
}

void JobRepository::complete(pqxx::work& tx, std::int64_t job_id) {
  tx.exec_params0("UPDATE jobs SET state = 'done', lease_expires_at = NULL, updated_at = now() WHERE id = $1",
                  job_id);
}

std::map<std::string, std::int64_t> JobRepository::counts_by_state(pqxx::work& tx) {
  std::map<std::string, std::int64_t> counts;
  pqxx::result rows = tx.exec(
      "SELECT s.state, count(j.id) FROM unnest(ARRAY['queued','running','done','failed']) AS s(state) "
      "LEFT JOIN jobs j ON j.state = s.state GROUP BY s.state ORDER BY s.state");
  for (const auto& row : rows) counts[row[0].as<std::string>()] = row[1].as<std::int64_t>();
  return counts;
}

}  // namespace kw::server
