// Which database a history read runs on, and what a commit means for the
// reads after it. With a streaming replica (--read-database-url) the history
// reads (projects, overview, cases, runs, branches, series) go to the
// replica, except where it has not yet replayed a write this process knows
// of: one it committed itself (committed()), or one the ChangeFeed heard
// another kw-server commit (heard()). Those go to the primary. So a client
// reads its own write at once from the server that took it, and from any
// other server once that server's feed has heard it, the same rule as the
// read cache's; and a stale answer is never put in the read cache, because a
// project's position is raised before its cached reads are dropped.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "errors.hpp"
#include "service/read_cache.hpp"
#include "store/database.hpp"

namespace kw::server {

// A WAL position as PostgreSQL prints a pg_lsn ("16/B374D848").
std::uint64_t parse_lsn(const std::string& text);

class ReadRouting {
 public:
  // Without `replica` every read runs on the primary and committed() only
  // drops the project's cached reads.
  ReadRouting(ConnectionPool& primary, ReadCache& cache, ConnectionPool* replica = nullptr,
              const DatabaseMonitor* replica_monitor = nullptr);

  // A write to `project` committed in this process.
  void committed(const std::string& project);
  // From the change feed: writes to `projects` committed before the primary
  // reached `lsn`.
  void heard(const std::vector<std::string>& projects, std::uint64_t lsn);
  // While the feed is down, writes go unheard: every read runs on the
  // primary and nothing is cached, until feed_resumed() says that the
  // writes missed all came before `lsn`.
  void feed_lost();
  void feed_resumed(std::uint64_t lsn);

  // read(ConnectionPool&) on the replica when it has replayed every write
  // known to `project` (empty: to any project), else on the primary. A
  // replica that fails the read (gone, or a query cancelled by recovery)
  // hands it to the primary.
  template <typename Read>
  auto run(const std::string& project, Read&& read) {
    if (ConnectionPool* replica = replica_for(project)) {
      try {
        auto answer = read(*replica);
        ++replica_reads_;
        return answer;
      } catch (const pqxx::broken_connection&) {
        ++fallbacks_;
      } catch (const pqxx::sql_error&) {
        ++fallbacks_;
      } catch (const ServiceUnavailable&) {
        ++fallbacks_;
      }
    }
    ++primary_reads_;
    return read(primary_);
  }

  bool has_replica() const { return replica_ != nullptr; }

  struct Counters {
    std::uint64_t primary_reads = 0, replica_reads = 0, fallbacks = 0;
    std::uint64_t replayed = 0;  // the replica's replay position last seen
    bool replica_up = false;
  };
  Counters counters() const;

 private:
  ConnectionPool* replica_for(const std::string& project);
  std::uint64_t needed_by(const std::string& project) const;
  // Asks the replica how far it has replayed.
  std::uint64_t refresh_replayed();

  ConnectionPool& primary_;
  ReadCache& cache_;
  ConnectionPool* replica_;
  const DatabaseMonitor* replica_monitor_;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::uint64_t> written_;  // project: position after its last known write
  std::uint64_t floor_ = 0;                                 // every project's: the feed's last resume
  std::uint64_t latest_ = 0;                                // the highest of all
  bool feed_up_ = false;

  std::atomic<std::uint64_t> replayed_{0};
  std::atomic<std::uint64_t> primary_reads_{0}, replica_reads_{0}, fallbacks_{0};
};

}  // namespace kw::server
