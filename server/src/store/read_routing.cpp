#include "store/read_routing.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "log_line.hpp"

namespace kw::server {

std::uint64_t parse_lsn(const std::string& text) {
  // Two hexadecimal halves of at most 32 bits each, around one slash.
  std::uint64_t halves[2] = {0, 0};
  int half = 0, digits = 0;
  for (const char c : text) {
    int value = -1;
    if (c >= '0' && c <= '9') value = c - '0';
    if (c >= 'A' && c <= 'F') value = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') value = c - 'a' + 10;
    if (c == '/' && half == 0 && digits > 0) {
      half = 1;
      digits = 0;
      continue;
    }
    if (value < 0 || ++digits > 8) throw std::invalid_argument("not a WAL position: \"" + text + "\"");
    halves[half] = halves[half] * 16 + static_cast<std::uint64_t>(value);
  }
  if (half != 1 || digits == 0) throw std::invalid_argument("not a WAL position: \"" + text + "\"");
  return (halves[0] << 32) | halves[1];
}

ReadRouting::ReadRouting(ConnectionPool& primary, ReadCache& cache, ConnectionPool* replica,
                         const DatabaseMonitor* replica_monitor)
    : primary_(primary), cache_(cache), replica_(replica), replica_monitor_(replica_monitor) {}

namespace {

// The primary's WAL position now: the insert position, not the flush one,
// so it is past the end of every record written so far, the commit records
// of writes committed on other connections included.
std::uint64_t primary_position(pqxx::transaction_base& tx) {
  return parse_lsn(tx.exec("SELECT pg_current_wal_insert_lsn()::text")[0][0].as<std::string>());
}

}  // namespace

void ReadRouting::committed(const std::string& project) {
  if (replica_ != nullptr) {
    std::uint64_t position = std::numeric_limits<std::uint64_t>::max();
    try {
      position =
          with_single_statement(primary_, [](pqxx::transaction_base& tx) { return primary_position(tx); });
    } catch (const std::exception& error) {
      // Unknown: the project's reads stay on the primary until the feed
      // starts over.
      LogLine() << "kw-server: reading the primary's WAL position after a write to " << project << ": "
                << error.what() << "\n";
    }
    std::lock_guard lock(mutex_);
    std::uint64_t& needed = written_[project];
    needed = std::max(needed, position);
    latest_ = std::max(latest_, position);
  }
  cache_.changed(project);
}

void ReadRouting::heard(const std::vector<std::string>& projects, std::uint64_t lsn) {
  {
    std::lock_guard lock(mutex_);
    for (const std::string& project : projects) {
      std::uint64_t& needed = written_[project];
      needed = std::max(needed, lsn);
    }
    if (!projects.empty()) latest_ = std::max(latest_, lsn);
  }
  for (const std::string& project : projects) cache_.changed(project);
}

void ReadRouting::feed_lost() {
  {
    std::lock_guard lock(mutex_);
    feed_up_ = false;
  }
  cache_.set_enabled(false);
}

void ReadRouting::feed_resumed(std::uint64_t lsn) {
  {
    std::lock_guard lock(mutex_);
    written_.clear();
    floor_ = latest_ = lsn;
    feed_up_ = true;
  }
  cache_.changed_all();
  cache_.set_enabled(true);
}

std::uint64_t ReadRouting::needed_by(const std::string& project) const {
  std::lock_guard lock(mutex_);
  if (!feed_up_) return std::numeric_limits<std::uint64_t>::max();
  if (project.empty()) return latest_;
  const auto found = written_.find(project);
  return found == written_.end() ? floor_ : std::max(floor_, found->second);
}

std::uint64_t ReadRouting::refresh_replayed() {
  const std::uint64_t replayed = with_single_statement(*replica_, [](pqxx::transaction_base& tx) {
    const pqxx::field position = tx.exec("SELECT pg_last_wal_replay_lsn()::text")[0][0];
    // NULL: not a standby (or not yet replaying); it counts as having replayed nothing.
    return position.is_null() ? std::uint64_t{0} : parse_lsn(position.as<std::string>());
  });
  std::uint64_t seen = replayed_.load();
  while (seen < replayed && !replayed_.compare_exchange_weak(seen, replayed)) {
  }
  return std::max(seen, replayed);
}

ConnectionPool* ReadRouting::replica_for(const std::string& project) {
  if (replica_ == nullptr || (replica_monitor_ != nullptr && !replica_monitor_->available())) return nullptr;
  const std::uint64_t needed = needed_by(project);
  if (needed == std::numeric_limits<std::uint64_t>::max()) return nullptr;
  if (replayed_.load() >= needed) return replica_;
  try {
    if (refresh_replayed() >= needed) return replica_;
  } catch (const std::exception&) {
    ++fallbacks_;  // the replica did not answer: the primary serves this read
  }
  return nullptr;
}

ReadRouting::Counters ReadRouting::counters() const {
  Counters counters;
  counters.primary_reads = primary_reads_;
  counters.replica_reads = replica_reads_;
  counters.fallbacks = fallbacks_;
  counters.replayed = replayed_;
  counters.replica_up = replica_ != nullptr && (replica_monitor_ == nullptr || replica_monitor_->available());
  return counters;
}

}  // namespace kw::server
