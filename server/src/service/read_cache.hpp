// Answers of the heaviest reads (a case's series, a project's overview),
// kept until a write touches their project. Under load those reads wait for
// a core behind PostgreSQL's ingest work; a dashboard asks for the same
// series again and again between two runs of its project.
//
// Correctness rests on two things. A writer of this process calls changed()
// after its commit, so its client reads its own write; writes of other paths
// and other replicas reach changed() through the ChangeFeed (PostgreSQL
// NOTIFY from triggers, schema 014) within milliseconds of their commit.
// While the feed is down nothing is served from here (set_enabled).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace kw::server {

class ReadCache {
 public:
  explicit ReadCache(std::size_t max_bytes = 64u << 20) : max_bytes_(max_bytes) {}

  // Taken before reading the database; put() keeps the answer only if no
  // change to its project was announced since, so an answer read before a
  // commit is never kept after that commit's changed().
  struct Ticket {
    std::uint64_t epoch = 0;
    std::uint64_t generation = 0;
    bool usable = false;
  };

  std::optional<std::string> get(const std::string& project, const std::string& key);
  Ticket ticket(const std::string& project);
  void put(const Ticket& ticket, const std::string& project, const std::string& key, std::string answer);

  void changed(const std::string& project);
  void changed_all();
  // False while changes may go unannounced (the feed is reconnecting).
  void set_enabled(bool enabled);

  struct Counters {
    std::uint64_t hits = 0, misses = 0, invalidations = 0;
    std::size_t entries = 0, bytes = 0;
  };
  Counters counters() const;

 private:
  struct Entry {
    std::string answer;
    std::list<std::pair<std::string, std::string>>::iterator lru;  // (project, key)
  };
  struct Project {
    std::uint64_t generation = 0;
    std::unordered_map<std::string, Entry> entries;
  };
  void drop(Project& project);
  void evict_to(std::size_t bytes);

  const std::size_t max_bytes_;
  mutable std::mutex mutex_;
  bool enabled_ = false;
  std::uint64_t epoch_ = 0;  // bumped by changed_all() and set_enabled()
  std::unordered_map<std::string, Project> projects_;
  std::list<std::pair<std::string, std::string>> lru_;  // most recent first
  std::size_t bytes_ = 0;
  std::uint64_t hits_ = 0, misses_ = 0, invalidations_ = 0;
};

}  // namespace kw::server
