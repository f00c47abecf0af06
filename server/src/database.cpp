#include "database.hpp"

#include <stdexcept>

namespace kw::server {

ConnectionPool::ConnectionPool(std::string url, std::size_t size, std::vector<Statement> statements)
    : url_(std::move(url)), statements_(std::move(statements)) {
  if (size == 0) throw std::invalid_argument("connection pool size must be > 0");
  connections_.resize(size);
  for (std::size_t i = 0; i < size; ++i) {
    connections_[i] = connect();
    free_.push_back(i);
  }
}

std::unique_ptr<pqxx::connection> ConnectionPool::connect() const {
  auto connection = std::make_unique<pqxx::connection>(url_);
  for (const Statement& statement : statements_) connection->prepare(statement.name, statement.sql);
  return connection;
}

ConnectionPool::Lease ConnectionPool::acquire() {
  std::unique_lock lock(mutex_);
  if (free_.empty()) {
    ++waits_;
    available_.wait(lock, [this] { return !free_.empty(); });
  }
  std::size_t slot = free_.back();
  free_.pop_back();
  if (!connections_[slot]) {
    lock.unlock();
    try {
      connections_[slot] = connect();
    } catch (...) {
      release(slot);
      throw;
    }
  }
  return Lease(*this, slot);
}

void ConnectionPool::release(std::size_t slot) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(slot);
  }
  available_.notify_one();
}

std::size_t ConnectionPool::in_use() const {
  std::lock_guard lock(mutex_);
  return connections_.size() - free_.size();
}

}  // namespace kw::server
