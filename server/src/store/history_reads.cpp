#include "store/history_reads.hpp"

#include "store/pg_array.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

namespace {

constexpr const char* kProjectsJson = R"sql(
SELECT COALESCE(json_agg(json_build_object(
  'name', p.name, 'default_branch', p.default_branch, 'created_at', p.created_at,
  'runs', (SELECT count(*) FROM runs r WHERE r.project_id = p.id),
  'last_run_at', (SELECT max(r.created_at) FROM runs r WHERE r.project_id = p.id)) ORDER BY p.name), '[]')::text
FROM projects p
WHERE $1::text[] IS NULL OR p.name = ANY ($1::text[])
)sql";

// The audit of skipping identical code in the project's pull requests: how
// many identical cases were timed anyway, and how many of those the run
// flagged (the misses), with the newest misses.
constexpr const char* kAuditJson = R"sql(
SELECT json_build_object(
  'identical_to_base', (SELECT count(*) FROM cases WHERE project_id = $1 AND identical_to_base),
  'audited', count(*),
  'misses', count(*) FILTER (WHERE c.status IN ('regression', 'improvement')),
  'miss_rate', CASE WHEN count(*) = 0 THEN NULL
                    ELSE (count(*) FILTER (WHERE c.status IN ('regression', 'improvement')))::float8 / count(*) END,
  'jobs_audited', count(DISTINCT c.run_id),
  'jobs_missed', count(DISTINCT c.run_id) FILTER (WHERE c.status IN ('regression', 'improvement')),
  'recent_misses', (SELECT COALESCE(json_agg(json_build_object('run_id', m.run_id, 'case', m.name,
                                                               'status', m.status, 'commit', r.commit_sha)
                                             ORDER BY m.run_id DESC), '[]')
                    FROM (SELECT run_id, name, status FROM cases
                          WHERE project_id = $1 AND audit AND status IN ('regression', 'improvement')
                          ORDER BY run_id DESC LIMIT 20) m JOIN runs r ON r.id = m.run_id)
)::text
FROM cases c WHERE c.project_id = $1 AND c.audit
)sql";

constexpr const char* kCasesJson = R"sql(
SELECT COALESCE(json_agg(x ORDER BY x.name), '[]')::text FROM (
  SELECT n.name, c.params, n.last_run_id, n.runs
  FROM (SELECT name, max(run_id) AS last_run_id, count(*) AS runs
        FROM cases WHERE project_id = $1 GROUP BY name) AS n
  JOIN cases c ON c.project_id = $1 AND c.name = n.name AND c.run_id = n.last_run_id
) AS x
)sql";

// Newest runs first, with their commit and, for a run that flagged a
// regression, the cases it flagged. $4: only those runs (the regressions
// list: an acknowledged one stays in it, marked).
constexpr const char* kRunsJson = R"sql(
SELECT COALESCE(json_agg(x ORDER BY x.id DESC), '[]')::text FROM (
  SELECT r.id, r.job_id, r.commit_sha AS commit, r.branch, r.base_commit, r.commit_subject AS subject,
         r.commit_author AS author, r.gpu_model, r.verdict, r.acknowledged_at IS NOT NULL AS acknowledged,
         r.gpu_seconds, r.started_at, r.finished_at, r.agent_name AS agent,
         r.case_count AS cases, r.device->>'kind' AS device_kind,
         CASE WHEN r.verdict = 'failed' THEN
           (SELECT s.name FROM stages s WHERE s.run_id = r.id AND s.status = 'failed' ORDER BY s.ordinal LIMIT 1)
         END AS failed_stage,
         (SELECT json_agg(json_build_object('case', x.case_name, 'kind', x.kind, 'ratio', x.ratio,
                                            'lower', x.lower, 'upper', x.upper) ORDER BY x.ratio DESC)
          FROM comparisons x WHERE x.run_id = r.id AND x.impl = 'candidate' AND x.status = 'regression'
            AND ($7 = '' OR x.case_name ILIKE $7))
           AS regressions
  FROM runs r
  WHERE r.project_id = $1 AND ($2 = '' OR r.branch = $2) AND ($6 = '' OR r.gpu_model = $6)
    AND (NOT $5::boolean OR r.verdict = 'regression' OR r.acknowledged_at IS NOT NULL)
    AND ($7 = '' OR CASE WHEN $5::boolean
      THEN EXISTS (SELECT 1 FROM comparisons x WHERE x.run_id = r.id AND x.impl = 'candidate'
                     AND x.status = 'regression' AND x.case_name ILIKE $7)
      ELSE EXISTS (SELECT 1 FROM cases c WHERE c.run_id = r.id AND c.name ILIKE $7) END)
  ORDER BY r.id DESC
  OFFSET $4::bigint LIMIT $3::integer
) AS x
)sql";

// The branches a project has runs on, the default first, then the most
// recently measured.
constexpr const char* kBranchesJson = R"sql(
SELECT COALESCE(json_agg(json_build_object('branch', b.branch, 'runs', b.runs, 'last_run_at', b.last_run_at,
                                           'default', b.branch = p.default_branch)
                         ORDER BY b.branch = p.default_branch DESC, b.last_run_at DESC), '[]')::text
FROM projects p
LEFT JOIN LATERAL (SELECT branch, count(*) AS runs, max(finished_at) AS last_run_at
                   FROM runs WHERE project_id = p.id GROUP BY branch) AS b ON true
WHERE p.id = $1 AND b.branch IS NOT NULL
)sql";

// The history of one case, newest `limit` runs, as parallel arrays ordered
// oldest first (the shape chart libraries plot directly, and the cheapest for
// PostgreSQL to build).
constexpr const char* kSeriesJson = R"sql(
WITH project AS (SELECT id, default_branch FROM projects WHERE name = $1)
SELECT json_build_object(
  'run_id', COALESCE(array_agg(x.id), '{}'),
  'commit', COALESCE(array_agg(x.commit_sha::text), '{}'),
  'subject', COALESCE(array_agg(x.commit_subject), '{}'),
  'author', COALESCE(array_agg(x.commit_author), '{}'),
  'committed_at', COALESCE(array_agg(extract(epoch FROM x.committed_at)), '{}'),
  'finished_at', COALESCE(array_agg(extract(epoch FROM x.finished_at)), '{}'),
  'gpu_model', COALESCE(array_agg(x.gpu_model), '{}'),
  'verdict', COALESCE(array_agg(x.verdict), '{}'),
  'status', COALESCE(array_agg(x.status), '{}'),
  'acknowledged', COALESCE(array_agg(x.acknowledged), '{}'),
  'median_ns', COALESCE(array_agg(x.medians), '{}'),
  'band_ns', COALESCE(array_agg(x.bands), '{}'),
  'energy_j', COALESCE(array_agg(x.energy_j), '{}'),
  'power_w', COALESCE(array_agg(x.power_w), '{}'),
  'energy_status', COALESCE(array_agg(x.energy_status), '{}'),
  'base_ns', COALESCE(array_agg(x.base_ns), '{}'),
  'detectable', COALESCE(array_agg(x.detectable), '{}'),
  'threshold', COALESCE(array_agg(x.threshold), '{}'))::text
FROM (
  SELECT * FROM (
    SELECT r.id, r.commit_sha, r.commit_subject, r.commit_author, r.committed_at, r.finished_at, r.gpu_model,
           r.verdict, c.medians, c.bands, r.acknowledged_at IS NOT NULL AS acknowledged, c.status,
           c.candidate_energy_j AS energy_j, c.candidate_power_w AS power_w,
           CASE WHEN c.candidate_energy_j IS NOT NULL THEN
             (SELECT x.status FROM comparisons x
              WHERE x.run_id = c.run_id AND x.case_name = c.name AND x.kind = 'energy' AND x.impl = 'candidate')
           END AS energy_status,
           (SELECT x.detectable FROM comparisons x
            WHERE x.run_id = c.run_id AND x.case_name = c.name AND x.kind = 'time' AND x.impl = 'candidate')
             AS detectable,
           (SELECT x.threshold FROM comparisons x
            WHERE x.run_id = c.run_id AND x.case_name = c.name AND x.kind = 'time' AND x.impl = 'candidate')
             AS threshold,
           -- A pull request's base level: the base measured in its job, else
           -- the stored baseline its comparison used.
           CASE WHEN r.base_commit IS NULL THEN NULL ELSE COALESCE(
             (SELECT m.median_ns FROM measurements m
              WHERE m.case_id = c.id AND m.side = 'base' AND m.impl = 'candidate'),
             (SELECT (c.medians->>'candidate')::float8 /
                     NULLIF(COALESCE(NULLIF(x.ratio_of_medians, 'Infinity'), x.ratio), 0)
              FROM comparisons x
              WHERE x.run_id = c.run_id AND x.case_name = c.name AND x.kind = 'time' AND x.impl = 'candidate'))
           END AS base_ns
    FROM cases c
    JOIN runs r ON r.id = c.run_id
    -- The project as a value, not a join, and the order cases_by_name's: the
    -- index is walked backwards and stops at the limit (joined to the
    -- project, every run of the case was read and sorted: 35 ms at 10,000).
    WHERE c.project_id = (SELECT id FROM project) AND c.name = $2
      AND r.branch = COALESCE(NULLIF($3, ''), (SELECT default_branch FROM project))
      AND ($4 = '' OR r.gpu_model = $4)
    ORDER BY c.project_id DESC, c.name DESC, c.run_id DESC
    LIMIT $5
  ) AS newest
  -- In commit order (a commit's runs in the order taken); runs whose agent
  -- sent no commit time where they were measured.
  ORDER BY COALESCE(newest.committed_at, newest.finished_at), newest.id
) AS x
HAVING EXISTS (SELECT 1 FROM project)
)sql";

// One row per case and GPU model: its newest run on the branch, that run's
// comparison, and the candidate's recent medians for a sparkline.
constexpr const char* kOverviewJson = R"sql(
WITH kept AS (
  SELECT h.name, h.gpu_model, h.run_id FROM case_heads h
  WHERE h.project_id = $1 AND h.branch = $2 AND ($3 = '' OR h.gpu_model = $3) AND ($6 = '' OR h.name ILIKE $6)
    -- A comparison is read for each case only when a status is asked for.
    AND ($7 = '' OR COALESCE((SELECT cmp.status FROM comparisons cmp
                              WHERE cmp.run_id = h.run_id AND cmp.case_name = h.name AND cmp.kind = 'time'
                                AND cmp.impl = 'candidate'), 'no-baseline') = ANY (string_to_array($7, ','))
         OR ('undetectable' = ANY (string_to_array($7, ',')) AND EXISTS (
               SELECT 1 FROM comparisons cmp
               WHERE cmp.run_id = h.run_id AND cmp.case_name = h.name AND cmp.kind = 'time'
                 AND cmp.impl = 'candidate' AND cmp.detectable > cmp.threshold)))
),
shown AS (SELECT * FROM kept ORDER BY name, gpu_model OFFSET $4::bigint LIMIT $5::integer),
total AS (SELECT count(*)::integer AS n FROM kept)
SELECT json_build_object(
  'paging', (SELECT json_build_object('page', $4::bigint / $5::integer + 1, 'per_page', $5::integer,
                                      'cases_total', total.n,
                                      'pages', GREATEST(1, (total.n + $5::integer - 1) / $5::integer))
             FROM total),
  'gpu_models', (SELECT COALESCE(json_agg(DISTINCT g.gpu_model), '[]') FROM runs g WHERE g.project_id = $1),
  -- The cases on this branch (and GPU model) the gate cannot guard at their threshold.
  'undetectable', (SELECT count(*) FROM case_heads h
                   JOIN comparisons cmp ON cmp.run_id = h.run_id AND cmp.case_name = h.name
                   WHERE h.project_id = $1 AND h.branch = $2 AND ($3 = '' OR h.gpu_model = $3)
                     AND cmp.kind = 'time' AND cmp.impl = 'candidate' AND cmp.detectable > cmp.threshold),
  'cases', COALESCE(json_agg(json_build_object(
    'case', l.name, 'params', c.params, 'gpu_model', l.gpu_model, 'run_id', l.run_id, 'commit', r.commit_sha,
    'verdict', r.verdict, 'median_ns', c.medians,
    'comparison', (SELECT json_build_object('status', cmp.status, 'ratio', cmp.ratio, 'lower', cmp.lower,
                                            'upper', cmp.upper, 'threshold', cmp.threshold,
                                            'detectable', cmp.detectable)
                   FROM comparisons cmp
                   WHERE cmp.run_id = l.run_id AND cmp.case_name = l.name AND cmp.kind = 'time'
                     AND cmp.impl = 'candidate'),
    'history', (SELECT json_agg(h.candidate ORDER BY h.run_id) FROM (
                  SELECT c2.run_id, (c2.medians->>'candidate')::float8 AS candidate
                  FROM cases c2 JOIN runs r2 ON r2.id = c2.run_id
                  WHERE c2.project_id = $1 AND c2.name = l.name AND r2.branch = $2 AND r2.gpu_model = l.gpu_model
                  ORDER BY c2.run_id DESC LIMIT 30) AS h)
  ) ORDER BY l.name, l.gpu_model), '[]'))::text
FROM shown l
JOIN cases c ON c.run_id = l.run_id AND c.name = l.name
JOIN runs r ON r.id = l.run_id
)sql";

std::string projects_json(pqxx::work& tx, const std::optional<std::vector<std::string>>& only) {
  return tx.exec_prepared("projects_json", nullable(text_array(only)))[0][0].as<std::string>();
}

std::string audit_json(pqxx::work& tx, std::int64_t project_id) {
  return tx.exec_prepared("audit_json", project_id)[0][0].as<std::string>();
}

std::string cases_json(pqxx::work& tx, std::int64_t project_id) {
  return tx.exec_prepared("cases_json", project_id)[0][0].as<std::string>();
}

std::string runs_json(pqxx::work& tx, std::int64_t project_id, const std::string& branch,
                      const CaseFilter& filter, const Page& page, bool regressions_only) {
  return tx
      .exec_prepared("runs_json", project_id, branch, page.per_page, page.offset(), regressions_only,
                     filter.gpu_model, filter.name_like)[0][0]
      .as<std::string>();
}

std::string branches_json(pqxx::work& tx, std::int64_t project_id) {
  return tx.exec_prepared("branches_json", project_id)[0][0].as<std::string>();
}

std::string overview_json(pqxx::work& tx, std::int64_t project_id, const std::string& branch,
                          const CaseFilter& filter, const Page& page) {
  return tx
      .exec_prepared("overview_json", project_id, branch, filter.gpu_model, page.offset(), page.per_page,
                     filter.name_like, filter.statuses)[0][0]
      .as<std::string>();
}

// One statement, so it runs outside a transaction in one round trip (the
// dashboard's most frequent read); `branch` empty: the project's default.
// nullopt when there is no such project.
std::optional<std::string> series_json(pqxx::transaction_base& tx, const std::string& project,
                                       const std::string& case_name, const std::string& gpu_model,
                                       const std::string& branch, int limit) {
  pqxx::result rows = tx.exec_prepared("series_json", project, case_name, branch, gpu_model, limit);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

}  // namespace

std::vector<Statement> PgHistoryReads::statements() {
  return {{"projects_json", kProjectsJson}, {"cases_json", kCasesJson},       {"audit_json", kAuditJson},
          {"runs_json", kRunsJson},         {"branches_json", kBranchesJson}, {"series_json", kSeriesJson},
          {"overview_json", kOverviewJson}};
}

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
    return with_transaction(pool, [&](pqxx::work& tx) { return projects_json(tx, only); });
  });
}

std::optional<std::string> PgHistoryReads::overview(const std::string& project, const std::string& branch,
                                                    const CaseFilter& filter, const Page& page) {
  return of_project(project, [&](pqxx::work& tx, std::int64_t id) {
    const std::string on = branch.empty() ? SettingsRepository::get(tx, id).default_branch : branch;
    return overview_json(tx, id, on, filter, page);
  });
}

std::optional<std::string> PgHistoryReads::cases(const std::string& project) {
  return of_project(project, [](pqxx::work& tx, std::int64_t id) { return cases_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::audit(const std::string& project) {
  return of_project(project, [](pqxx::work& tx, std::int64_t id) { return audit_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::runs(const std::string& project, const std::string& branch,
                                                const CaseFilter& filter, const Page& page,
                                                bool regressions_only) {
  return of_project(project, [&](pqxx::work& tx, std::int64_t id) {
    return runs_json(tx, id, branch, filter, page, regressions_only);
  });
}

std::optional<std::string> PgHistoryReads::branches(const std::string& project) {
  return of_project(project, [](pqxx::work& tx, std::int64_t id) { return branches_json(tx, id); });
}

std::optional<std::string> PgHistoryReads::series(const std::string& project, const std::string& case_name,
                                                  const std::string& gpu, const std::string& branch,
                                                  int limit) {
  return routing_.run(project, [&](ConnectionPool& pool) {
    return with_single_statement(pool, [&](pqxx::transaction_base& tx) {
      return series_json(tx, project, case_name, gpu, branch, limit);
    });
  });
}

}  // namespace kw::server
