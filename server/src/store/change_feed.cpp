#include "store/change_feed.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <system_error>
#include <vector>

#include <libpq-fe.h>

#include "log_line.hpp"

namespace kw::server {

namespace {

PGconn* pg(void* connection) {
  return static_cast<PGconn*>(connection);
}

std::string error_of(PGconn* connection) {
  std::string text = connection != nullptr ? PQerrorMessage(connection) : "out of memory";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

ChangeFeed::ChangeFeed(std::string url, ReadRouting& routing) : url_(std::move(url)), routing_(routing) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "change feed: pipe2");
  thread_ = std::thread([this] { run(); });
}

ChangeFeed::~ChangeFeed() {
  stop_ = true;
  // Ends the wait for a notification now, not at its timeout; if the byte
  // cannot be written the thread still sees stop_ within 250 ms.
  [[maybe_unused]] const auto written = ::write(wake_[1], "x", 1);
  thread_.join();
  close();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

bool ChangeFeed::wait(int fd, std::chrono::milliseconds limit) const {
  pollfd fds[2] = {{wake_[0], POLLIN, 0}, {fd, POLLIN, 0}};
  const int ready = ::poll(fds, fd >= 0 ? 2 : 1, static_cast<int>(limit.count()));
  return ready > 0 && (fds[1].revents & POLLIN) != 0 && !stop_;
}

void ChangeFeed::close() {
  routing_.feed_lost();
  listening_ = false;
  if (connection_ != nullptr) PQfinish(pg(connection_));
  connection_ = nullptr;
}

void ChangeFeed::run() {
  auto backoff = std::chrono::milliseconds(100);
  std::string reported;  // the problem last logged, so a long outage logs once
  while (!stop_) {
    std::string problem;
    if (connection_ == nullptr) {
      std::uint64_t resumed_at = 0;
      if (!listen(problem) || !position(resumed_at, problem)) {
        close();
        if (problem != reported) LogLine() << "kw-server: read cache off: " << problem << std::endl;
        reported = problem;
        wait(-1, backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
        continue;
      }
      if (!reported.empty()) LogLine() << "kw-server: read cache on again" << std::endl;
      reported.clear();
      backoff = std::chrono::milliseconds(100);
      // Changes made while nobody listened were not heard.
      routing_.feed_resumed(resumed_at);
      listening_ = true;
      ++connects_;
    }
    if (!receive(std::chrono::milliseconds(250), problem)) {
      close();
      LogLine() << "kw-server: read cache off: " << problem << std::endl;
      reported = problem;
    }
  }
}

bool ChangeFeed::listen(std::string& problem) {
  const char* keys[] = {"dbname", "connect_timeout", nullptr};
  const char* values[] = {url_.c_str(), "2", nullptr};
  connection_ = PQconnectdbParams(keys, values, 1);
  if (connection_ == nullptr || PQstatus(pg(connection_)) != CONNECTION_OK) {
    problem = "cannot connect to hear changes: " + error_of(pg(connection_));
    return false;
  }
  PGresult* result = PQexec(pg(connection_), "LISTEN kw_changes");
  const bool ok = result != nullptr && PQresultStatus(result) == PGRES_COMMAND_OK;
  if (!ok) problem = "LISTEN kw_changes failed: " + error_of(pg(connection_));
  PQclear(result);
  return ok;
}

bool ChangeFeed::receive(std::chrono::milliseconds limit, std::string& problem) {
  const int socket = PQsocket(pg(connection_));
  if (socket < 0) {
    problem = "the connection that hears changes has no socket";
    return false;
  }
  if (!this->wait(socket, limit)) return true;  // nothing yet, stopping, or EINTR
  if (PQconsumeInput(pg(connection_)) != 1) {
    problem = "the connection that hears changes broke: " + error_of(pg(connection_));
    return false;
  }
  std::vector<std::string> projects;
  while (PGnotify* notification = PQnotifies(pg(connection_))) {
    projects.emplace_back(notification->extra);
    PQfreemem(notification);
  }
  if (projects.empty()) return true;
  std::uint64_t lsn = 0;
  if (!position(lsn, problem)) return false;
  routing_.heard(projects, lsn);
  return true;
}

bool ChangeFeed::position(std::uint64_t& lsn, std::string& problem) {
  lsn = 0;
  if (!routing_.has_replica()) return true;
  PGresult* result = PQexec(pg(connection_), "SELECT pg_current_wal_insert_lsn()::text");
  const bool ok = result != nullptr && PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1;
  if (ok) {
    lsn = parse_lsn(PQgetvalue(result, 0, 0));
  } else {
    problem = "reading the primary's WAL position failed: " + error_of(pg(connection_));
  }
  PQclear(result);
  return ok;
}

}  // namespace kw::server
