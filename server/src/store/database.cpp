#include "store/database.hpp"

#include <poll.h>

#include <future>
#include <stdexcept>

#include <libpq-fe.h>

#include "errors.hpp"
#include "log_line.hpp"

namespace kw::server {

ConnectionPool::ConnectionPool(std::string url, std::size_t size, std::vector<Statement> statements,
                               const DatabaseMonitor* monitor, std::chrono::milliseconds acquire_timeout,
                               std::chrono::milliseconds statement_timeout)
    : url_(std::move(url)),
      statements_(std::move(statements)),
      monitor_(monitor),
      acquire_timeout_(acquire_timeout),
      statement_timeout_(statement_timeout) {
  if (size == 0) throw std::invalid_argument("connection pool size must be > 0");
  // Opened side by side: each is a handshake and a SCRAM exchange, about
  // 15 ms on loopback, and a start waited for them one after another.
  std::vector<std::future<std::unique_ptr<pqxx::connection>>> opening;
  opening.reserve(size);
  for (std::size_t i = 0; i < size; ++i)
    opening.push_back(std::async(std::launch::async, [this] { return connect(); }));
  connections_.resize(size);
  for (std::size_t i = 0; i < size; ++i) {
    connections_[i] = opening[i].get();
    free_.push_back(i);
  }
}

std::unique_ptr<pqxx::connection> ConnectionPool::connect() const {
  auto connection = std::make_unique<pqxx::connection>(url_);
  {
    pqxx::nontransaction session(*connection);
    session.exec("SET statement_timeout = " + std::to_string(statement_timeout_.count()));
    // A run's bulk statements pass the planner's JIT threshold by their
    // row estimates; compiling them took 400 ms, longer than running them.
    session.exec("SET jit = off");
  }
  for (const Statement& statement : statements_) connection->prepare(statement.name, statement.sql);
  return connection;
}

ConnectionPool::Lease ConnectionPool::acquire() {
  if (monitor_ != nullptr && !monitor_->available())
    throw ServiceUnavailable("database_unavailable", monitor_->problem());
  std::unique_lock lock(mutex_);
  if (free_.empty()) {
    ++waits_;
    if (!available_.wait_for(lock, acquire_timeout_, [this] { return !free_.empty(); })) {
      throw ServiceUnavailable("database_unavailable", "no database connection came free within " +
                                                           std::to_string(acquire_timeout_.count()) + " ms");
    }
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

DatabaseMonitor::DatabaseMonitor(std::string url, std::string what, std::chrono::milliseconds period,
                                 std::chrono::milliseconds deadline)
    : url_(std::move(url)), what_(std::move(what)), period_(period), deadline_(deadline) {
  thread_ = std::thread([this] { run(); });
}

DatabaseMonitor::~DatabaseMonitor() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (connection_ != nullptr) PQfinish(static_cast<PGconn*>(connection_));
}

std::string DatabaseMonitor::problem() const {
  std::lock_guard lock(mutex_);
  return "the " + what_ + " is not answering: " + problem_;
}

void DatabaseMonitor::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    std::string problem;
    const auto started = std::chrono::steady_clock::now();
    const bool answered = ping(problem);
    if (answered) {
      last_ping_ms_ =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    }
    lock.lock();
    if (answered != available_) {
      LogLine() << "kw-server: " << what_ << " "
                << (answered ? "answers again" : "stopped answering: " + problem) << std::endl;
    }
    problem_ = answered ? std::string() : problem;
    available_ = answered;
    wake_.wait_for(lock, period_, [this] { return stop_; });
  }
}

bool DatabaseMonitor::ping(std::string& problem) {
  const auto deadline = std::chrono::steady_clock::now() + deadline_;
  auto conn = [this] { return static_cast<PGconn*>(connection_); };
  auto fail = [&](const std::string& what) {
    const char* detail = conn() != nullptr ? PQerrorMessage(conn()) : "";
    problem = what + (detail != nullptr && *detail ? std::string(": ") + detail : std::string());
    while (!problem.empty() && (problem.back() == '\n' || problem.back() == ' ')) problem.pop_back();
    if (conn() != nullptr) PQfinish(conn());
    connection_ = nullptr;
    return false;
  };
  // Waits for the socket until the deadline; false when it passed.
  auto wait_for = [&](short events) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{PQsocket(conn()), events, 0};
    return ::poll(&fd, 1, static_cast<int>(left.count())) > 0;
  };
  if (conn() == nullptr) {
    connection_ = PQconnectStart(url_.c_str());
    if (conn() == nullptr) return fail("out of memory");
    if (PQstatus(conn()) == CONNECTION_BAD) return fail("cannot connect");
    for (PostgresPollingStatusType state = PGRES_POLLING_WRITING; state != PGRES_POLLING_OK;) {
      if (state == PGRES_POLLING_FAILED) return fail("cannot connect");
      if (!wait_for(state == PGRES_POLLING_READING ? POLLIN : POLLOUT))
        return fail("no connection within " + std::to_string(deadline_.count()) + " ms");
      state = PQconnectPoll(conn());
    }
    if (PQsetnonblocking(conn(), 1) != 0) return fail("cannot make the connection non-blocking");
  }
  if (PQsendQuery(conn(), "SELECT 1") != 1) return fail("cannot send a ping");
  for (int flushed = PQflush(conn()); flushed != 0; flushed = PQflush(conn())) {
    if (flushed < 0 || !wait_for(POLLOUT)) return fail("cannot send a ping");
  }
  bool ok = false;
  for (;;) {
    if (PQconsumeInput(conn()) != 1) return fail("connection lost");
    if (PQisBusy(conn()) != 0) {
      if (!wait_for(POLLIN))
        return fail("no answer to a ping within " + std::to_string(deadline_.count()) + " ms");
      continue;
    }
    PGresult* result = PQgetResult(conn());
    if (result == nullptr) break;
    ok = ok || PQresultStatus(result) == PGRES_TUPLES_OK;
    PQclear(result);
  }
  return ok ? true : fail("the ping failed");
}

}  // namespace kw::server
