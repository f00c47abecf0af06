// Memory that requests share: what inflating and parsing a body will take is
// taken from one budget as it grows, so a few hostile bodies at once cannot
// take the host's memory, and a request that would pass it is refused at
// once instead of waiting on the others.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace kw::common {

// The shared budget is spent: the request may succeed later.
class MemoryBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MemoryBudget {
 public:
  explicit MemoryBudget(std::size_t capacity) : capacity_(capacity) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  bool try_take(std::size_t bytes) {
    std::size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_ - std::min(used, capacity_)) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void give(std::size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  std::size_t used() const { return used_.load(std::memory_order_relaxed); }
  std::size_t capacity() const { return capacity_; }

 private:
  const std::size_t capacity_;
  std::atomic<std::size_t> used_{0};
};

// One request's share of a budget, given back when the request ends. Thread
// safe: a body's parts are parsed on several threads.
class MemoryLease {
 public:
  explicit MemoryLease(MemoryBudget* budget = nullptr) : budget_(budget) {}
  MemoryLease(const MemoryLease&) = delete;
  MemoryLease& operator=(const MemoryLease&) = delete;
  ~MemoryLease() {
    if (budget_ == nullptr) return;
    budget_->give(held_.load());
#ifdef __GLIBC__
    // What a large body held is given back to the system, not kept in the
    // free lists of the threads that parsed it, where the next large body,
    // parsed on other threads, would not find it.
    if (held_ >= kTrimBytes) malloc_trim(0);
#endif
  }

  // Throws MemoryBusy when the shared budget cannot give `bytes` more.
  void take(std::size_t bytes) {
    if (budget_ == nullptr || bytes == 0) return;
    if (!budget_->try_take(bytes))
      throw MemoryBusy("the server's memory for request bodies (" + std::to_string(budget_->capacity()) +
                       " bytes) is in use by other requests");
    held_ += bytes;
  }
  // The buffer that held `bytes` was freed.
  void give(std::size_t bytes) {
    if (budget_ == nullptr || bytes == 0) return;
    held_ -= bytes;
    budget_->give(bytes);
  }
  std::size_t held() const {
    return held_.load();
  }

 private:
  static constexpr std::size_t kTrimBytes = std::size_t{64} << 20;
  MemoryBudget* budget_;
  std::atomic<std::size_t> held_{0};
};

}  // namespace kw::common
