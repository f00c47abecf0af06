// What a decision announces, written in the transaction that makes it: the
// notification outbox's rows (commit statuses, webhooks) for the Notifier to
// deliver.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "model/notifications.hpp"

namespace kw::server {

class NotificationRepository {
 public:
  static void job_queued(pqxx::work& tx, const NotifierOptions& options, std::int64_t project_id,
                         const nlohmann::json& job);
  static void verdict(pqxx::work& tx, const NotifierOptions& options, std::int64_t run_id);
  // A bisect that ended: found, a status on its first bad commit; any end, a webhook.
  static void bisect_ended(pqxx::work& tx, const NotifierOptions& options, std::int64_t bisect_id);
  // A job that ended without a run (its agent could not run it, or its
  // lease ran out on every attempt): an error status on its commit.
  static void job_failed(pqxx::work& tx, const NotifierOptions& options, std::int64_t job_id);
  // A profile job that ended (done or failed): a webhook, no status.
  static void profile_ended(pqxx::work& tx, const NotifierOptions& options, std::int64_t job_id);
  // The delivery targets the project's settings name (NotificationOutbox's keys).
  static std::vector<std::string> targets_of_project(pqxx::work& tx, const NotifierOptions& options,
                                                     std::int64_t project_id);
};

}  // namespace kw::server
