#include "pipeline/prepared_passes.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kw::agent {

namespace fs = std::filesystem;

void PreparedPasses::prepare(const std::string& key, common::ChildSpec spec) {
  if (dir_.empty()) {
    char pattern[] = "/tmp/kw-prepared-XXXXXX";
    if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed for prepared passes");
    dir_ = pattern;
  }
  const fs::path go = dir_ / ("go-" + std::to_string(++prepared_));  // it waits for this to appear
  spec.argv.insert(spec.argv.end(), {"--go-file", go.string()});
  // A prepared process outliving kw would wait for a go that never comes.
  spec.parent_death_signal = SIGKILL;
  auto dismissed = std::make_unique<std::atomic<bool>>(false);
  auto outcome = std::async(std::launch::async, [spec = std::move(spec), flag = dismissed.get()] {
    return common::run_child(spec, *flag);
  });
  waiting_[key].push_back({go, std::move(dismissed), std::move(outcome)});
}

void PreparedPasses::top_up(const std::string& key, const common::ChildSpec& spec) {
  std::lock_guard lock(mutex_);
  while (!stop_.load() && waiting_[key].size() < kDepth) prepare(key, spec);
}

void PreparedPasses::write_go(const fs::path& go, const std::string& document) {
  // Whole or not at all: the process reads it the moment it appears.
  const fs::path partial = go.string() + ".partial";
  {
    std::ofstream out(partial);
    out << document;
    if (!out.flush()) throw std::runtime_error("cannot write " + partial.string());
  }
  fs::rename(partial, go);
}

common::ChildOutcome PreparedPasses::run(const std::string& key, const common::ChildSpec& spec,
                                         const std::vector<std::string>& arguments) {
  std::optional<Waiting> waiting;
  {
    std::lock_guard lock(mutex_);
    auto it = waiting_.find(key);
    if (it != waiting_.end() && !it->second.empty()) {
      waiting = std::move(it->second.front());
      it->second.pop_front();
    }
  }
  top_up(key, spec);
  if (!waiting) {
    common::ChildSpec fresh = spec;
    fresh.argv.insert(fresh.argv.end(), arguments.begin(), arguments.end());
    return common::run_child(fresh, stop_);
  }
  const auto go_at = std::chrono::steady_clock::now();
  write_go(waiting->go, nlohmann::json{{"argv", arguments}}.dump());
  // Its stop flag is its own (see the destructor): the job's stop reaches it here.
  while (waiting->outcome.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (stop_.load()) *waiting->dismissed = true;
  }
  common::ChildOutcome outcome = waiting->outcome.get();
  // A process that died before its go (an import that failed) left the file.
  std::error_code ec;
  fs::remove(waiting->go, ec);
  outcome.seconds = std::min(outcome.seconds,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - go_at).count());
  ++used_;
  return outcome;
}

PreparedPasses::~PreparedPasses() {
  // Ended, not told to exit: one still importing would see its go only once
  // its import is done, seconds on.
  for (auto& [_, queue] : waiting_) {
    for (Waiting& waiting : queue) *waiting.dismissed = true;
  }
  for (auto& [_, queue] : waiting_) {
    for (Waiting& waiting : queue) waiting.outcome.wait();
  }
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

}  // namespace kw::agent
