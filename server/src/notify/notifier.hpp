// Verdict notifications: GitHub and GitLab commit statuses (pending when a
// job is queued, success/failure with a description and a link on its
// verdict) and a generic webhook signed with HMAC-SHA256. Enqueued into the notifications
// table inside the transaction that sets the verdict; a background worker
// sends them with retries and backoff, so ingest never waits on GitHub.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "store/database.hpp"

namespace kw::server {

struct NotifierOptions {
  std::string github_api = "https://api.github.com";
  std::string github_token;  // statuses are sent only when set
  std::string gitlab_api = "https://gitlab.com/api/v4";
  std::string gitlab_token;    // PRIVATE-TOKEN (api scope); statuses are sent only when set
  std::string webhook_secret;  // signs webhook bodies (X-Kernelwatch-Signature-256)
  std::string public_url;      // base of links in statuses and webhooks
  int max_attempts = 8;
  double poll_seconds = 0.5;
};

class NotificationRepository {
 public:
  static void job_queued(pqxx::work& tx, const NotifierOptions& options, std::int64_t project_id,
                         const nlohmann::json& job);
  static void verdict(pqxx::work& tx, const NotifierOptions& options, std::int64_t run_id);
  // A bisect that ended: found, a status on its first bad commit; any end, a webhook.
  static void bisect_ended(pqxx::work& tx, const NotifierOptions& options, std::int64_t bisect_id);
  // A job that ended without a run (its agent could not run it, or its
  // lease ran out on every attempt): an error status on its commit, and a
  // bisect step skipped as a commit that does not build is (the bisect goes
  // on, or ends and says so).
  static void job_failed(pqxx::work& tx, const NotifierOptions& options, std::int64_t job_id);
  // A profile job that ended (done or failed): a webhook, no status.
  static void profile_ended(pqxx::work& tx, const NotifierOptions& options, std::int64_t job_id);
};

class Notifier {
 public:
  Notifier(ConnectionPool& pool, NotifierOptions options);
  ~Notifier();
  void start();
  void stop();

 private:
  void run();
  bool deliver_due();  // true when it sent something

  ConnectionPool& pool_;
  NotifierOptions options_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace kw::server
