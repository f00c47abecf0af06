// Hears which projects' runs, cases, comparisons or settings changed, from
// any kw-server on the database: a libpq connection of its own LISTENs on
// channel kw_changes, which schema 014's triggers notify at commit. Each
// notification is handed to ReadRouting, which routes the project's reads to
// the primary until the replica has the change, then drops its cached reads;
// while the connection is down the cache is off, and on reconnecting it
// starts empty, since changes made meanwhile were not heard.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "store/read_routing.hpp"

namespace kw::server {

class ChangeFeed {
 public:
  ChangeFeed(std::string url, ReadRouting& routing);
  ~ChangeFeed();
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  bool listening() const { return listening_; }
  // Times it started listening: a reconnect is one more.
  std::uint64_t connects() const { return connects_; }

 private:
  void run();
  bool listen(std::string& problem);
  // Waits up to `limit` for notifications and hands them to the cache; false
  // when the connection broke.
  bool receive(std::chrono::milliseconds limit, std::string& problem);
  // Up to `limit` for `fd` (none: -1) to be readable; false at the limit or
  // once the destructor woke the thread.
  bool wait(int fd, std::chrono::milliseconds limit) const;
  // The primary's WAL position, asked on the feed's connection (0 without a
  // replica, which is the only use of it); false when that failed.
  bool position(std::uint64_t& lsn, std::string& problem);
  void close();

  std::string url_;
  ReadRouting& routing_;
  void* connection_ = nullptr;  // PGconn*, kept out of this header
  std::atomic<bool> listening_{false};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<bool> stop_{false};
  int wake_[2] = {-1, -1};  // a pipe: the destructor's byte ends a wait
  std::thread thread_;
};

}  // namespace kw::server
