#include "notify/notifier.hpp"

#include "errors.hpp"
#include "kw/common/sha256.hpp"
#include "log_line.hpp"
#include "notify/outbound_http.hpp"
#include "store/notification_outbox.hpp"

namespace kw::server {

using nlohmann::json;

Notifier::Notifier(ConnectionPool& pool, NotifierOptions options)
    : pool_(pool), options_(std::move(options)) {}

Notifier::~Notifier() {
  stop();
}

void Notifier::start() {
  dispatcher_ = std::thread([this] { dispatch(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { work(); });
}

void Notifier::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

// Claims what is due into the queue, one notification per target at a time:
// a target is handed out again only once its previous attempt has ended.
void Notifier::dispatch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::vector<std::string> busy(busy_.begin(), busy_.end());
    const int free_workers = std::max(1, options_.workers) - static_cast<int>(busy_.size());
    lock.unlock();
    std::vector<Outgoing> due;
    if (free_workers > 0) {
      try {
        // The lease outlasts one attempt by far: no other server process
        // sends the same notification meanwhile.
        const double lease = 4.0 * static_cast<double>(options_.timeouts.total.count()) + 60;
        due = with_transaction(pool_, [&](pqxx::work& tx) {
          return NotificationOutbox::claim_due(tx, busy, free_workers, lease);
        });
      } catch (const ServiceUnavailable&) {  // the database monitor logs that once
      } catch (const std::exception& error) {
        LogLine() << "kw-server: notifier: " << error.what() << "\n";
      }
    }
    lock.lock();
    for (Outgoing& item : due) {
      busy_.insert(item.target);
      queue_.push_back(std::move(item));
    }
    if (!due.empty()) wake_.notify_all();
    wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_seconds),
                   [this] { return stopping_ || wake_dispatcher_; });
    wake_dispatcher_ = false;
  }
}

void Notifier::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Outgoing item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      deliver(item);
    } catch (const std::exception& error) {
      LogLine() << "kw-server: notifier: " << error.what() << "\n";
    }
    lock.lock();
    busy_.erase(item.target);
    wake_dispatcher_ = true;
    wake_.notify_all();
  }
}

std::map<std::string, std::string> Notifier::headers_for(const Outgoing& item) const {
  if (item.kind == "github_status")
    return {{"Authorization", "Bearer " + options_.github_token},
            {"Accept", "application/vnd.github+json"},
            {"X-GitHub-Api-Version", "2022-11-28"}};
  if (item.kind == "gitlab_status") return {{"PRIVATE-TOKEN", options_.gitlab_token}};
  // verdict, bisect or profile: what the payload says it is.
  const std::string event = json::parse(item.body).value("event", std::string("verdict"));
  std::map<std::string, std::string> headers{{"X-Kernelwatch-Event", event},
                                             {"X-Kernelwatch-Delivery", std::to_string(item.id)}};
  if (!options_.webhook_secret.empty())
    headers["X-Kernelwatch-Signature-256"] =
        "sha256=" + common::hmac_sha256_hex(options_.webhook_secret, item.body);
  return headers;
}

void Notifier::deliver(const Outgoing& item) {
  std::string error;
  try {
    // Statuses go to the forge kw-server's operator named; a webhook to
    // wherever a project admin pointed it.
    const bool webhook = item.kind != "github_status" && item.kind != "gitlab_status";
    const Reach reach = webhook && !options_.allow_private_webhooks ? Reach::public_only : Reach::any;
    OutboundResponse response = post_json(item.url, item.body, headers_for(item), options_.timeouts, reach);
    if (response.status / 100 == 2) {
      with_transaction(pool_, [&](pqxx::work& tx) { NotificationOutbox::delivered(tx, item); });
      return;
    }
    // The status alone: what the target answered is its own business, and
    // would show whatever an internal service says to whoever reads it.
    error = "HTTP " + std::to_string(response.status);
  } catch (const std::exception& failure) {
    error = failure.what();
  }
  const double backoff = std::min(600.0, std::pow(2.0, item.attempts - 1));
  const bool give_up = item.attempts >= options_.max_attempts;
  LogLine() << "kw-server: notification " << item.id << " (" << item.kind << " to " << item.target
            << ") attempt " << item.attempts << " failed: " << error << (give_up ? "; giving up" : "")
            << "\n";
  with_transaction(pool_, [&](pqxx::work& tx) {
    NotificationOutbox::failed(tx, item, error, backoff, give_up, options_.target_policy);
  });
}

}  // namespace kw::server
