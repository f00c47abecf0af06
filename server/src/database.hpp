// Connections to PostgreSQL: a fixed pool (one per worker thread), prepared
// statements registered by the repositories, and transactions retried on
// serialization failures and broken connections.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

namespace kw::server {

// A prepared statement: its name and SQL, declared beside the repository code
// that runs it.
struct Statement {
  const char* name;
  const char* sql;
};

class ConnectionPool {
 public:
  ConnectionPool(std::string url, std::size_t size, std::vector<Statement> statements);

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
      std::cerr << "kw-server: database connection lost (" << error.what() << "), retrying\n";
    } catch (const pqxx::transaction_rollback&) {  // serialization failure, deadlock
      if (attempt >= kAttempts) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
  }
}

}  // namespace kw::server
