// Connections to PostgreSQL: a fixed pool (one per worker thread), prepared
// statements registered by the repositories, transactions retried on
// serialization failures and broken connections, and a monitor that says
// whether the database answers at all.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "log_line.hpp"

namespace kw::server {

// A prepared statement: its name and SQL, declared beside the repository code
// that runs it.
struct Statement {
  const char* name;
  const char* sql;
};

// Whether the database answers. A thread pings it (SELECT 1 on a libpq
// connection of its own, never blocking) every `period`; a ping unanswered
// after `deadline` marks the database unavailable until one is answered.
// Requests then get 503 at once: waiting on a frozen PostgreSQL would hold
// every request, the dashboard and /metrics too, about 20 s (libpq's own
// timeouts).
class DatabaseMonitor {
 public:
  // `what` names it in the log and in problem(): "database", "read replica".
  explicit DatabaseMonitor(std::string url, std::string what = "database",
                           std::chrono::milliseconds period = std::chrono::milliseconds(250),
                           std::chrono::milliseconds deadline = std::chrono::milliseconds(1000));
  ~DatabaseMonitor();
  DatabaseMonitor(const DatabaseMonitor&) = delete;
  DatabaseMonitor& operator=(const DatabaseMonitor&) = delete;

  bool available() const { return available_; }
  // "the database is not answering: WHY", while not available.
  std::string problem() const;
  // The last answered ping's round trip.
  double last_ping_ms() const { return last_ping_ms_; }

 private:
  void run();
  // One ping within the deadline; the connection is dropped on any failure.
  bool ping(std::string& problem);

  std::string url_, what_;
  std::chrono::milliseconds period_, deadline_;
  void* connection_ = nullptr;  // PGconn*, kept out of this header
  std::atomic<bool> available_{true};
  std::atomic<double> last_ping_ms_{0};
  mutable std::mutex mutex_;
  std::string problem_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

class ConnectionPool {
 public:
  // A request that finds the database unavailable (`monitor`, may be null),
  // or no connection free within `acquire_timeout`, is refused with 503.
  // Every connection runs its statements under `statement_timeout`.
  ConnectionPool(std::string url, std::size_t size, std::vector<Statement> statements,
                 const DatabaseMonitor* monitor = nullptr,
                 std::chrono::milliseconds acquire_timeout = std::chrono::seconds(2),
                 std::chrono::milliseconds statement_timeout = std::chrono::seconds(30));

  class Lease {
   public:
    Lease(ConnectionPool& pool, std::size_t slot) : pool_(&pool), slot_(slot) {}
    Lease(Lease&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), slot_(other.slot_) {}
    Lease(const Lease&) = delete;
    ~Lease() {
      if (pool_ != nullptr) pool_->release(slot_);
    }
    pqxx::connection& connection() { return *pool_->connections_[slot_]; }
    // The connection broke: replace it before the next use.
    void discard() { pool_->connections_[slot_].reset(); }

   private:
    ConnectionPool* pool_;
    std::size_t slot_;
  };

  Lease acquire();

  std::size_t size() const { return connections_.size(); }
  std::size_t in_use() const;
  std::uint64_t waits() const { return waits_; }
  const std::string& url() const { return url_; }

 private:
  void release(std::size_t slot);
  std::unique_ptr<pqxx::connection> connect() const;

  std::string url_;
  std::vector<Statement> statements_;
  const DatabaseMonitor* monitor_;
  std::chrono::milliseconds acquire_timeout_, statement_timeout_;
  std::vector<std::unique_ptr<pqxx::connection>> connections_;
  std::vector<std::size_t> free_;
  mutable std::mutex mutex_;
  std::condition_variable available_;
  std::atomic<std::uint64_t> waits_{0};
};

// Runs `body(pqxx::work&)` in a transaction and commits; retries the whole
// body on serialization failures, deadlocks and broken connections.
template <typename Body>
auto with_transaction(ConnectionPool& pool, Body&& body) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    auto lease = pool.acquire();
    try {
      pqxx::work tx(lease.connection());
      if constexpr (std::is_void_v<decltype(body(tx))>) {
        body(tx);
        tx.commit();
        return;
      } else {
        auto result = body(tx);
        tx.commit();
        return result;
      }
    } catch (const pqxx::broken_connection& error) {
      lease.discard();
      if (attempt >= kAttempts) throw;
      LogLine() << "kw-server: database connection lost (" << error.what() << "), retrying\n";
    } catch (const pqxx::transaction_rollback&) {  // serialization failure, deadlock
      if (attempt >= kAttempts) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
  }
}

// A read of one statement: no BEGIN and COMMIT around it, so one round trip
// to the database instead of three (under load each waits for the CPU).
template <typename Body>
auto with_single_statement(ConnectionPool& pool, Body&& body) {
  auto lease = pool.acquire();
  try {
    pqxx::nontransaction tx(lease.connection());
    return body(tx);
  } catch (const pqxx::broken_connection&) {
    lease.discard();
    throw;
  }
}

}  // namespace kw::server
