// Runs a command in its own process group and collects its output: with a
// timeout and a stop flag the whole group gets SIGTERM, then SIGKILL, so a
// hung kernel or a forked helper never outlives it. The agent's stages, the
// harness's per-case runs, kw-server's initdb/pg_ctl and the tests use it.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kw::common {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::filesystem::path cwd;
  std::map<std::string, std::string> env;  // added to this process's environment
  double timeout_s = 600;
  std::size_t tail_bytes = std::size_t{16} * 1024;
  // Also copy the child's output to this process's stderr as it comes (its
  // progress lines).
  bool echo = false;
  // Called with each line of the child's output as it comes (without the
  // newline), on the thread that runs the child.
  std::function<void(const std::string&)> on_line;
  // When this process is root: the user the child runs as (PostgreSQL's
  // tools refuse root).
  std::string run_as;
  // Sent to the child when the thread that started it ends, this process's
  // death by SIGKILL included (PR_SET_PDEATHSIG): 0 for none.
  int parent_death_signal = 0;
  // After SIGTERM (timeout or stop flag), how long the group has before SIGKILL.
  double stop_grace_s = 5;
};

struct ChildOutcome {
  int exit_code = -1;  // 128 + signal when killed by one
  bool timed_out = false;
  bool stopped = false;  // the stop flag was raised
  std::string output_tail;
  double seconds = 0;

  bool ok() const { return exit_code == 0 && !timed_out && !stopped; }
  std::string describe() const;  // "exited 2", "timed out after 30 s", ...
  // The line of its output that says why it died, where it printed one: a
  // Python exception's last line (`ImportError: ... undefined symbol: ...`),
  // a C++ exception's what(), the loader's error. Empty when none.
  std::string error_line() const;
};

ChildOutcome run_child(const ChildSpec& spec, const std::atomic<bool>& stop);
ChildOutcome run_child(const ChildSpec& spec);  // no stop flag

// Convenience for `sh -c COMMAND`.
ChildSpec shell(const std::string& command, const std::filesystem::path& cwd, double timeout_s);

}  // namespace kw::common
