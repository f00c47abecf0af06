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

#include "model/notifications.hpp"
#include "notify/outbound_http.hpp"
#include "store/database.hpp"
#include "store/notification_outbox.hpp"

namespace kw::server {

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
