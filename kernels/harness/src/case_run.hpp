// What the stages of one case share (kwbench's harness, host code):
// the case set up on its own stream, its implementations, the timers, and
// the text of numbers in stage messages. stages.hpp is the stages' API.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "stages.hpp"

namespace kwbench::case_run {

using nlohmann::json;

inline json dim3_json(const Dim3& d) {
  return json::array({d.x, d.y, d.z});
}
inline std::string dim3_text(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

inline std::string kib(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buffer;
}

inline std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

// Three significant digits, whatever the size: a kernel 230x slower than
// its baseline runs at 0.00435x of it, not "0.00x".
inline std::string speedup_text(double speedup) {
  return format("%.3g", speedup) + "x";
}

inline std::string range_text(const SanityRange& range) {
  const bool low = range.min_speedup > 0, high = range.max_speedup < 1e9;
  if (low && high) return speedup_text(range.min_speedup) + ".." + speedup_text(range.max_speedup);
  if (low) return "at least " + speedup_text(range.min_speedup);
  if (high) return "at most " + speedup_text(range.max_speedup);
  return "unbounded";
}

// A stream and state for one case, set up with fresh seeded inputs.
// Torn down in reverse: the case's handles while its stream lives, then its
// allocations, then the stream.
struct Prepared {
  Case& c;
  cudaStream_t stream = nullptr;
  std::unique_ptr<State> state;

  Prepared(Case& the_case, const BenchOptions& options) : c(the_case) {
    KW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    state = std::make_unique<State>(stream, options.seed ^ std::hash<std::string>{}(c.name()), options.impls);
    try {
      c.setup(*state);
      KW_CUDA_CHECK(cudaStreamSynchronize(stream));
    } catch (...) {
      release();
      throw;
    }
  }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() { release(); }

 private:
  void release() {
    if (state) {
      cudaStreamSynchronize(stream);  // teardown: an error here has nowhere to go
      try {
        c.teardown(*state);
      } catch (...) {
      }
    }
    state.reset();
    if (stream) cudaStreamDestroy(stream);
    stream = nullptr;
  }
};

struct EventTimer {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventTimer() {
    KW_CUDA_CHECK(cudaEventCreate(&start));
    KW_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventTimer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <typename Fn>
  double time_ns(cudaStream_t stream, Fn&& fn) {
    KW_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    KW_CUDA_CHECK(cudaEventRecord(stop, stream));
    KW_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    KW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) * 1e6;
  }
};

// Start and stop events for the rounds of one batch, each implementation's
// own, recorded while the batch is queued and read once it has finished.
class EventBatch {
 public:
  explicit EventBatch(std::size_t impls) : impls_(impls) {}
  ~EventBatch() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  EventBatch(const EventBatch&) = delete;
  EventBatch& operator=(const EventBatch&) = delete;
  void reserve(int rounds) {
    while (events_.size() < 2 * impls_ * static_cast<std::size_t>(rounds)) {
      cudaEvent_t event = nullptr;
      KW_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
  }
  void start(int round, std::size_t impl, cudaStream_t stream) {
    KW_CUDA_CHECK(cudaEventRecord(events_.at(index(round, impl)), stream));
  }
  void stop(int round, std::size_t impl, cudaStream_t stream) {
    KW_CUDA_CHECK(cudaEventRecord(events_.at(index(round, impl) + 1), stream));
  }
  double elapsed_ns(int round, std::size_t impl) const {
    float ms = 0;
    KW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[index(round, impl)], events_[index(round, impl) + 1]));
    return static_cast<double>(ms) * 1e6;
  }

 private:
  std::size_t index(int round, std::size_t impl) const {
    return 2 * (static_cast<std::size_t>(round) * impls_ + impl);
  }
  std::size_t impls_;
  std::vector<cudaEvent_t> events_;
};

// Queued work per batch of timed rounds, and a bound on the events it holds.
inline constexpr double kBatchSeconds = 0.01;
inline constexpr int kMaxBatchRounds = 256;
// Warm-up: the batch-to-batch change of time per round that counts as settled.
inline constexpr double kSettledSpread = 0.02;

// The implementations of a case that can run here: candidate first.
struct Impl {
  std::string name;
  std::string baseline;  // empty for the candidate
};

inline std::vector<Impl> runnable_impls(Case& c, json& skipped, const std::string& timed = "*") {
  std::vector<Impl> impls;
  if (glob_match(timed, "candidate")) impls.push_back({"candidate", ""});
  for (const std::string& baseline : c.baselines()) {
    if (!glob_match(timed, "baseline:" + baseline)) continue;
    std::string why = c.baseline_unavailable(baseline);
    if (why.empty()) {
      impls.push_back({"baseline:" + baseline, baseline});
    } else {
      skipped["baseline:" + baseline] = why;
    }
  }
  return impls;
}

inline void run_impl(Case& c, const Impl& impl, State& state) {
  if (impl.baseline.empty()) {
    c.run_candidate(state);
  } else {
    c.run_baseline(impl.baseline, state);
  }
}

inline json case_header(Case& c) {
  return {{"name", c.name()}, {"params", c.params()}};
}

inline CaseOutcome failed_outcome(Case& c, const std::string& message) {
  CaseOutcome outcome;
  outcome.status = "failed";
  outcome.message = message;
  outcome.part = case_header(c);
  return outcome;
}

}  // namespace kwbench::case_run
