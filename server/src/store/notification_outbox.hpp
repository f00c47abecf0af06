// The notifications outbox: what is due, per target, and how each target
// fares. Notifications are written in the transaction that decides what they
// say (NotificationRepository) and delivered from here by the Notifier.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "model/notifications.hpp"

namespace kw::server {

struct Outgoing {
  std::int64_t id = 0;
  std::string kind;  // github_status, gitlab_status or webhook
  std::string url;
  std::string body;
  std::string target;
  int attempts = 0;  // this one included
};

class NotificationOutbox {
 public:
  // The target a notification is queued under: "github", "gitlab", or a
  // webhook's scheme://host[:port].
  static std::string target_of(const std::string& kind, const std::string& url);
  static void enqueue(pqxx::work& tx, const std::string& kind, const std::string& url,
                      const nlohmann::json& payload);

  // The oldest undelivered notification of each target that is due, not
  // paused and not in `busy` (targets this process is sending to), at most
  // `limit`; each one's next attempt is pushed `lease_seconds` out, so no
  // other server process sends it meanwhile.
  static std::vector<Outgoing> claim_due(pqxx::work& tx, const std::vector<std::string>& busy, int limit,
                                         double lease_seconds);
  static void delivered(pqxx::work& tx, const Outgoing& sent);
  // A failed attempt: retried after `backoff_seconds`, or given up on; the
  // target's run of failures grows and it is paused per `policy`.
  static void failed(pqxx::work& tx, const Outgoing& sent, const std::string& error, double backoff_seconds,
                     bool give_up, const TargetPolicy& policy);

  // The state of `targets`: [{target, state: ok|failing|paused, consecutive_failures,
  // paused_until, last_error, pending}].
  static nlohmann::json targets_json(pqxx::work& tx, const std::vector<std::string>& targets);
  // Pending notifications, and each target with failures in a row.
  static OutboxHealth health(pqxx::work& tx);
};

}  // namespace kw::server
