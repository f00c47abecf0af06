#include "store/notification_outbox.hpp"

#include "store/pg_array.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// Strictly in order within a target: only a target's oldest undelivered
// notification may go, once it is due.
constexpr const char* kClaimDue = R"sql(
UPDATE notifications SET next_attempt_at = now() + make_interval(secs => $3), attempts = attempts + 1
WHERE id IN (
  SELECT n.id FROM (
    SELECT DISTINCT ON (target) id, target, next_attempt_at FROM notifications
    WHERE delivered_at IS NULL AND failed_at IS NULL
    ORDER BY target, id) n
  LEFT JOIN notification_targets t ON t.target = n.target
  WHERE n.next_attempt_at <= now() AND NOT (n.target = ANY ($1::text[]))
    AND (t.paused_until IS NULL OR t.paused_until <= now())
  ORDER BY n.id
  LIMIT $2)
  AND next_attempt_at <= now() AND delivered_at IS NULL AND failed_at IS NULL
RETURNING id, kind, url, payload::text, attempts, target
)sql";

constexpr const char* kTargetFailed = R"sql(
INSERT INTO notification_targets AS t (target, consecutive_failures, last_error, last_failure_at, paused_until)
VALUES ($1, 1, $2, now(), CASE WHEN 1 >= $3 THEN now() + make_interval(secs => $4) END)
ON CONFLICT (target) DO UPDATE
  SET consecutive_failures = t.consecutive_failures + 1, last_error = $2, last_failure_at = now(),
      paused_until = CASE WHEN t.consecutive_failures + 1 >= $3 THEN now() + make_interval(secs => $4) END
)sql";

constexpr const char* kTargetsJson = R"sql(
SELECT COALESCE(json_agg(json_build_object(
  'target', w.target,
  'state', CASE WHEN t.paused_until > now() THEN 'paused'
                WHEN COALESCE(t.consecutive_failures, 0) > 0 THEN 'failing' ELSE 'ok' END,
  'consecutive_failures', COALESCE(t.consecutive_failures, 0),
  'paused_until', t.paused_until, 'last_error', t.last_error, 'last_failure_at', t.last_failure_at,
  'last_success_at', t.last_success_at,
  'pending', (SELECT count(*) FROM notifications n
              WHERE n.target = w.target AND n.delivered_at IS NULL AND n.failed_at IS NULL))
  ORDER BY w.target), '[]')::text
FROM unnest($1::text[]) AS w(target) LEFT JOIN notification_targets t ON t.target = w.target
)sql";

}  // namespace

std::string NotificationOutbox::target_of(const std::string& kind, const std::string& url) {
  if (kind == "github_status") return "github";
  if (kind == "gitlab_status") return "gitlab";
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const std::size_t end = url.find_first_of("/?#", scheme + 3);
  return url.substr(0, end);
}

void NotificationOutbox::enqueue(pqxx::work& tx, const std::string& kind, const std::string& url,
                                 const json& payload) {
  tx.exec_params0("INSERT INTO notifications (kind, url, payload, target) VALUES ($1, $2, $3::jsonb, $4)",
                  kind, url, payload.dump(), target_of(kind, url));
}

std::vector<Outgoing> NotificationOutbox::claim_due(pqxx::work& tx, const std::vector<std::string>& busy,
                                                    int limit, double lease_seconds) {
  PgArray excluded;
  for (const std::string& target : busy) excluded.text(target);
  std::vector<Outgoing> due;
  for (const auto& row : tx.exec_params(kClaimDue, excluded.str(), limit, lease_seconds)) {
    due.push_back({row[0].as<std::int64_t>(), row[1].as<std::string>(), row[2].as<std::string>(),
                   row[3].as<std::string>(), row[5].as<std::string>(), row[4].as<int>()});
  }
  return due;
}

void NotificationOutbox::delivered(pqxx::work& tx, const Outgoing& sent) {
  tx.exec_params0("UPDATE notifications SET delivered_at = now(), last_error = NULL WHERE id = $1", sent.id);
  tx.exec_params0(
      "INSERT INTO notification_targets AS t (target, last_success_at) VALUES ($1, now()) "
      "ON CONFLICT (target) DO UPDATE SET consecutive_failures = 0, paused_until = NULL, last_success_at = "
      "now()",
      sent.target);
}

void NotificationOutbox::failed(pqxx::work& tx, const Outgoing& sent, const std::string& error,
                                double backoff_seconds, bool give_up, const TargetPolicy& policy) {
  tx.exec_params0(
      "UPDATE notifications SET last_error = $2, next_attempt_at = now() + make_interval(secs => $3), "
      "  failed_at = CASE WHEN $4 THEN now() END WHERE id = $1",
      sent.id, error, backoff_seconds, give_up);
  tx.exec_params0(kTargetFailed, sent.target, error, policy.pause_after_failures, policy.pause_seconds);
}

json NotificationOutbox::targets_json(pqxx::work& tx, const std::vector<std::string>& targets) {
  PgArray wanted;
  for (const std::string& target : targets) wanted.text(target);
  return json::parse(tx.exec_params1(kTargetsJson, wanted.str())[0].as<std::string>());
}

OutboxHealth NotificationOutbox::health(pqxx::work& tx) {
  OutboxHealth health;
  health.pending =
      tx.exec1("SELECT count(*) FROM notifications WHERE delivered_at IS NULL AND failed_at IS NULL")[0]
          .as<std::int64_t>();
  for (const auto& row : tx.exec("SELECT target, consecutive_failures, COALESCE(paused_until > now(), false) "
                                 "FROM notification_targets "
                                 "WHERE consecutive_failures > 0 ORDER BY target"))
    health.failing.push_back({row[0].as<std::string>(), row[1].as<int>(), row[2].as<bool>()});
  return health;
}

}  // namespace kw::server
