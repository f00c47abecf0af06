#include "service/read_cache.hpp"

namespace kw::server {

std::optional<std::string> ReadCache::get(const std::string& project, const std::string& key) {
  std::lock_guard lock(mutex_);
  if (!enabled_) return std::nullopt;
  auto found = projects_.find(project);
  if (found != projects_.end()) {
    auto entry = found->second.entries.find(key);
    if (entry != found->second.entries.end()) {
      lru_.splice(lru_.begin(), lru_, entry->second.lru);
      ++hits_;
      return entry->second.answer;
    }
  }
  ++misses_;
  return std::nullopt;
}

ReadCache::Ticket ReadCache::ticket(const std::string& project) {
  std::lock_guard lock(mutex_);
  auto found = projects_.find(project);
  return Ticket{epoch_, found == projects_.end() ? 0 : found->second.generation, enabled_};
}

void ReadCache::put(const Ticket& ticket, const std::string& project, const std::string& key,
                    std::string answer) {
  const std::size_t size = answer.size() + key.size();
  std::lock_guard lock(mutex_);
  if (!ticket.usable || !enabled_ || ticket.epoch != epoch_ || size > max_bytes_ / 4) return;
  Project& entries = projects_[project];
  if (entries.generation != ticket.generation) return;
  auto [entry, inserted] = entries.entries.try_emplace(key);
  if (!inserted) {
    bytes_ -= entry->second.answer.size() + key.size();
    lru_.erase(entry->second.lru);
  }
  lru_.emplace_front(project, key);
  entry->second.lru = lru_.begin();
  entry->second.answer = std::move(answer);
  bytes_ += size;
  evict_to(max_bytes_);
}

void ReadCache::drop(Project& project) {
  for (auto& [key, entry] : project.entries) {
    bytes_ -= entry.answer.size() + key.size();
    lru_.erase(entry.lru);
  }
  project.entries.clear();
}

void ReadCache::evict_to(std::size_t bytes) {
  while (bytes_ > bytes && !lru_.empty()) {
    auto [project, key] = lru_.back();
    Project& owner = projects_[project];
    auto entry = owner.entries.find(key);
    bytes_ -= entry->second.answer.size() + key.size();
    owner.entries.erase(entry);
    lru_.pop_back();
  }
}

void ReadCache::changed(const std::string& project) {
  std::lock_guard lock(mutex_);
  Project& entries = projects_[project];
  ++entries.generation;
  ++invalidations_;
  drop(entries);
}

void ReadCache::changed_all() {
  std::lock_guard lock(mutex_);
  ++epoch_;
  ++invalidations_;
  for (auto& [name, project] : projects_) drop(project);
}

void ReadCache::set_enabled(bool enabled) {
  std::lock_guard lock(mutex_);
  if (enabled == enabled_) return;
  enabled_ = enabled;
  ++epoch_;
  for (auto& [name, project] : projects_) drop(project);
}

ReadCache::Counters ReadCache::counters() const {
  std::lock_guard lock(mutex_);
  std::size_t entries = 0;
  for (const auto& [name, project] : projects_) entries += project.entries.size();
  return Counters{hits_, misses_, invalidations_, entries, bytes_};
}

}  // namespace kw::server
