#include "process.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kw::server {

ProcessResult run_process(const std::vector<std::string>& argv, const std::optional<std::string>& run_as) {
  if (argv.empty()) throw std::invalid_argument("run_process: empty argv");
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop = run_as && geteuid() == 0;
  if (drop) {
    passwd* entry = getpwnam(run_as->c_str());
    if (entry == nullptr)
      throw std::runtime_error("no such user \"" + *run_as + "\" to run " + argv[0] + " as");
    uid = entry->pw_uid;
    gid = entry->pw_gid;
  }
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    if (drop && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
      dprintf(STDERR_FILENO, "cannot switch to user %s: %s\n", run_as->c_str(), std::strerror(errno));
      _exit(126);
    }
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  ProcessResult result;
  std::array<char, 4096> buffer{};
  for (;;) {
    ssize_t n = read(fds[0], buffer.data(), buffer.size());
    if (n > 0) {
      result.output.append(buffer.data(), static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace kw::server
