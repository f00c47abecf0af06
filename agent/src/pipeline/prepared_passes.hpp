// Python replicates started before their turn. A python bench's process
// spends seconds importing torch, Triton and the extension before it times
// anything; a prepared process does that while the GPU times another pass,
// then waits (no CUDA context yet) for its pass's arguments. Each process
// still measures exactly one replicate, so the between-process variance the
// statistics rest on stays in the data (docs/detection.md), and a pass's
// seconds count from its go, not from its start.
//
// Five wait per side: a pass takes a few tenths of a second once its
// process is ready (it leaves without the interpreter's teardown), while an
// import takes seconds, so a side's next processes must have started
// several passes before their turn (with two, every third pass of a side
// waited seconds for its import). Both sides are prepared before the first
// pass (`top_up`). The processes not used are ended (SIGTERM) when the
// passes are done, importing or not: nobody waits for an import to finish.
#pragma once

#include <atomic>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kw/common/subprocess.hpp"

namespace kw::agent {

class PreparedPasses {
 public:
  explicit PreparedPasses(const std::atomic<bool>& stop) : stop_(stop) {}
  PreparedPasses(const PreparedPasses&) = delete;
  PreparedPasses& operator=(const PreparedPasses&) = delete;
  ~PreparedPasses();  // idle processes are told to exit, and waited for

  // Runs one pass: `spec` (a bench command without its pass's arguments)
  // with `arguments`, in the process prepared for `key` (its checkout) during
  // an earlier pass if one waits, else in a fresh one; and first prepares the
  // next pass's process, which imports while this one measures. Seconds
  // count from the pass's go.
  common::ChildOutcome run(const std::string& key, const common::ChildSpec& spec,
                           const std::vector<std::string>& arguments);
  // Starts processes for `key` until kDepth wait.
  void top_up(const std::string& key, const common::ChildSpec& spec);

  static constexpr std::size_t kDepth = 5;

  int used() const { return used_; }

 private:
  struct Waiting {
    std::filesystem::path go;
    std::unique_ptr<std::atomic<bool>> dismissed;  // its run_child's stop flag
    std::future<common::ChildOutcome> outcome;
  };
  void prepare(const std::string& key, common::ChildSpec spec);  // under mutex_
  static void write_go(const std::filesystem::path& go, const std::string& document);

  const std::atomic<bool>& stop_;
  std::filesystem::path dir_;  // of the go files
  int prepared_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::deque<Waiting>> waiting_;
  int used_ = 0;
};

}  // namespace kw::agent
