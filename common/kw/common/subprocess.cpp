#include "kw/common/subprocess.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace kw::common {

namespace {

using Clock = std::chrono::steady_clock;

void append_tail(std::string& tail, const char* data, std::size_t size, std::size_t limit) {
  tail.append(data, size);
  if (tail.size() > 2 * limit) tail.erase(0, tail.size() - limit);
}

}  // namespace

std::string ChildOutcome::describe() const {
  if (stopped) return "stopped (the agent is shutting down)";
  if (timed_out)
    return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s (process group killed)";
  if (exit_code > 128) return std::string("killed by signal ") + strsignal(exit_code - 128);
  return "exited " + std::to_string(exit_code);
}

std::string ChildOutcome::error_line() const {
  static const std::regex python(R"(^([A-Za-z_][\w.]*)?(Error|Exception|Interrupt|Exit)(: .*)?$)");
  static const std::regex native(
      R"(what\(\):\s+.*|error while loading shared libraries: .*|Segmentation fault.*)");
  std::istringstream lines(output_tail);
  std::string found;
  for (std::string line; std::getline(lines, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    std::smatch match;
    if (std::regex_match(line, python)) {
      found = line;
    } else if (std::regex_search(line, match, native)) {
      found = match.str(0);
    }
  }
  constexpr std::size_t kLongest = 400;
  return found.size() > kLongest ? found.substr(0, kLongest) + "..." : found;
}

ChildSpec shell(const std::string& command, const std::filesystem::path& cwd, double timeout_s) {
  ChildSpec spec;
  spec.argv = {"/bin/sh", "-c", command};
  spec.cwd = cwd;
  spec.timeout_s = timeout_s;
  return spec;
}

namespace {

// The child's side of run_child, between fork and exec: its own process
// group, the pipe as stdout and stderr, the spec's directory, environment and
// user. It never returns.
[[noreturn]] void exec_child(const ChildSpec& spec, int out_fd, pid_t parent, bool drop, uid_t uid,
                             gid_t gid) {
  setpgid(0, 0);
  // A parent that blocks signals for sigwait (kw-server) must not pass that on.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
    dprintf(STDERR_FILENO, "cannot enter %s: %s\n", spec.cwd.c_str(), std::strerror(errno));
    _exit(126);
  }
  for (const auto& [key, value] : spec.env) setenv(key.c_str(), value.c_str(), 1);
  if (drop && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
    dprintf(STDERR_FILENO, "cannot switch to user %s: %s\n", spec.run_as.c_str(), std::strerror(errno));
    _exit(126);
  }
  // After the user switch, which clears it; a parent already gone is the signal.
  if (spec.parent_death_signal != 0 &&
      (prctl(PR_SET_PDEATHSIG, spec.parent_death_signal) != 0 || getppid() != parent)) {
    _exit(125);
  }
  std::vector<char*> args;
  for (const std::string& arg : spec.argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

ChildOutcome run_child(const ChildSpec& spec, const std::atomic<bool>& stop) {
  if (spec.argv.empty()) throw std::invalid_argument("run_child: empty argv");
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop = !spec.run_as.empty() && geteuid() == 0;
  if (drop) {
    passwd* entry = getpwnam(spec.run_as.c_str());
    if (entry == nullptr)
      throw std::runtime_error("no such user \"" + spec.run_as + "\" to run " + spec.argv[0] + " as");
    uid = entry->pw_uid;
    gid = entry->pw_gid;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  auto started = Clock::now();
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) exec_child(spec, fds[1], parent, drop, uid, gid);
  setpgid(pid, pid);  // also from here, so the group exists before any kill
  close(fds[1]);

  ChildOutcome outcome;
  auto deadline =
      started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.timeout_s));
  Clock::time_point kill_at{};
  bool terminating = false, exited = false;
  int status = 0;
  char buffer[8192];
  std::string partial_line;  // for on_line
  for (;;) {
    pollfd pfd{fds[0], POLLIN, 0};
    int ready = poll(&pfd, 1, 100);
    if (ready > 0) {
      ssize_t n = read(fds[0], buffer, sizeof(buffer));
      if (n > 0) {
        append_tail(outcome.output_tail, buffer, static_cast<std::size_t>(n), spec.tail_bytes);
        if (spec.echo) (void)!write(STDERR_FILENO, buffer, static_cast<std::size_t>(n));
        if (spec.on_line) {
          partial_line.append(buffer, static_cast<std::size_t>(n));
          for (std::size_t end; (end = partial_line.find('\n')) != std::string::npos;) {
            spec.on_line(partial_line.substr(0, end));
            partial_line.erase(0, end + 1);
          }
        }
        continue;
      }
      if (n == 0) break;  // every writer in the group is gone
    }
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      // Helpers it left behind still hold the pipe: end them with it.
      kill(-pid, SIGKILL);
    }
    auto now = Clock::now();
    if (!terminating && !exited && (now > deadline || stop.load())) {
      outcome.timed_out = now > deadline;
      outcome.stopped = !outcome.timed_out;
      kill(-pid, SIGTERM);
      terminating = true;
      kill_at =
          now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.stop_grace_s));
    }
    if (terminating && now > kill_at) kill(-pid, SIGKILL);
  }
  close(fds[0]);
  if (!exited) {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  kill(-pid, SIGKILL);
  if (outcome.output_tail.size() > spec.tail_bytes) {
    outcome.output_tail.erase(0, outcome.output_tail.size() - spec.tail_bytes);
  }
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return outcome;
}

ChildOutcome run_child(const ChildSpec& spec) {
  static const std::atomic<bool> never{false};
  return run_child(spec, never);
}

}  // namespace kw::common
