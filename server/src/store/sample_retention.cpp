#include "store/sample_retention.hpp"

namespace kw::server {

namespace {

// Partitions are named samples_YYYY_MM (kw_samples_month, schema 027).
constexpr const char* kExpiredMonths = R"sql(
SELECT c.relname
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'samples'::regclass
  AND c.relname ~ '^samples_[0-9]{4}_[0-9]{2}$'
  AND (to_date(substr(c.relname, 9), 'YYYY_MM') + interval '1 month')::date <= current_date - $1::integer
ORDER BY c.relname
)sql";

// The month's rows that judging may still read, moved to today's partition:
// the cases among the newest `runs` judged runs of their case, branch and
// GPU model (what detection_baseline picks on a branch), and the newest run
// of each commit that is still a base: of a job not yet done, of a pull
// request measured within the window ($3 days), or a running bisect's good
// end. A long-lived pull request, a release branch or a bisect of an old
// range so keeps its baseline.
constexpr const char* kKeepNeeded = R"sql(
WITH month AS (
  SELECT to_date(substr($1, 9), 'YYYY_MM') AS first, (to_date(substr($1, 9), 'YYYY_MM') + interval '1 month')::date AS last
),
groups AS (
  SELECT DISTINCT c.project_id, c.name, r.gpu_model, r.branch
  FROM samples s, month, cases c, runs r
  WHERE s.stored_on >= month.first AND s.stored_on < month.last AND c.id = s.case_id AND r.id = c.run_id
),
bases AS (
  SELECT project_id, base_commit AS commit_sha FROM jobs
  WHERE state IN ('queued', 'running') AND base_commit IS NOT NULL
  UNION
  SELECT project_id, base_commit FROM runs
  WHERE base_commit IS NOT NULL AND created_at > now() - make_interval(days => $3)
  UNION
  SELECT project_id, commits[good + 1] FROM bisects WHERE state = 'running'
),
kept AS (
  SELECT k.id
  FROM groups g
  CROSS JOIN LATERAL (
    SELECT c.id FROM cases c JOIN runs r ON r.id = c.run_id
    WHERE c.project_id = g.project_id AND c.name = g.name AND r.gpu_model = g.gpu_model AND r.branch = g.branch
      AND r.verdict IN ('pass', 'improvement', 'regression')
    ORDER BY c.run_id DESC
    LIMIT $2) AS k
  UNION
  SELECT newest.id FROM bases b
  CROSS JOIN LATERAL (
    SELECT DISTINCT ON (c.name, r.gpu_model) c.id FROM cases c JOIN runs r ON r.id = c.run_id
    WHERE r.project_id = b.project_id AND r.commit_sha = b.commit_sha
      AND r.verdict IN ('pass', 'improvement', 'regression')
    ORDER BY c.name, r.gpu_model, c.run_id DESC) AS newest
)
UPDATE samples s SET stored_on = current_date
FROM month
WHERE s.stored_on >= month.first AND s.stored_on < month.last AND s.case_id IN (SELECT id FROM kept)
)sql";

}  // namespace

void SampleRetention::ensure_months(pqxx::work& tx) {
  tx.exec(
      "SELECT kw_samples_month(current_date), kw_samples_month((current_date + interval '1 month')::date)");
}

std::vector<std::string> SampleRetention::expired_months(pqxx::work& tx, const RetentionPolicy& policy) {
  std::vector<std::string> months;
  for (const auto& row : tx.exec_params(kExpiredMonths, policy.days))
    months.push_back(row[0].as<std::string>());
  return months;
}

std::int64_t SampleRetention::keep_needed(pqxx::work& tx, const std::string& month,
                                          const RetentionPolicy& policy) {
  ensure_months(tx);
  return static_cast<std::int64_t>(
      tx.exec_params(kKeepNeeded, month, policy.runs, policy.days).affected_rows());
}

void SampleRetention::drop_month(pqxx::work& tx, const std::string& month) {
  // The drop locks `samples` whole: ingests queue behind it while it waits
  // for the ones running, so it waits at most this long and the next pass
  // tries again.
  tx.exec("SET LOCAL lock_timeout = '1s'");
  tx.exec("DROP TABLE IF EXISTS " + tx.quote_name(month));
}

}  // namespace kw::server
