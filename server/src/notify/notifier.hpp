// Verdict notifications: GitHub and GitLab commit statuses (pending when a
// job is queued, success/failure with a description and a link on its
// verdict) and a generic webhook signed with HMAC-SHA256. Enqueued into the notifications
// table inside the transaction that sets the verdict; a pool of workers sends
// them, in order per target and independently across targets, with retries
// and backoff, so ingest never waits on GitHub and no target waits on another.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "notify/outbound_http.hpp"
#include "store/database.hpp"
#include "store/notification_outbox.hpp"

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
  // Deliveries run on this many threads, each target on one at a time, so a
  // target that hangs holds one thread for at most `timeouts.total`.
  int workers = 4;
  OutboundTimeouts timeouts;
  TargetPolicy target_policy;
  // Webhooks may reach loopback and private addresses (an on-premises forge
  // or receiver); off, a project admin cannot make kw-server call into its
  // own network.
  bool allow_private_webhooks = false;
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
  // The delivery targets the project's settings name (NotificationOutbox's keys).
  static std::vector<std::string> targets_of_project(pqxx::work& tx, const NotifierOptions& options,
                                                     std::int64_t project_id);
};

class Notifier {
 public:
  Notifier(ConnectionPool& pool, NotifierOptions options);
  ~Notifier();
  void start();
  void stop();

 private:
  void dispatch();
  void work();
  void deliver(const Outgoing& item);
  std::map<std::string, std::string> headers_for(const Outgoing& item) const;

  ConnectionPool& pool_;
  NotifierOptions options_;
  std::thread dispatcher_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Outgoing> queue_;
  std::set<std::string> busy_;  // targets with an attempt queued or under way
  bool wake_dispatcher_ = false;
  bool stopping_ = false;
};

}  // namespace kw::server
