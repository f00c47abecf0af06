// A long-running child process whose output is read line by line in the
// background (tests only): start a server, wait for a line, signal it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kw::testing {

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
        std::lock_guard lock(mutex_);
        output_.append(buffer, static_cast<std::size_t>(n));
        changed_.notify_all();
      }
      close(fd);
      std::lock_guard lock(mutex_);
      eof_ = true;
      changed_.notify_all();
    });
  }

  ~ChildProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      wait_exit();
    }
    if (reader_.joinable()) reader_.join();
  }

  // Waits until the output matches `pattern`; returns the first capture group.
  std::string wait_for(const std::string& pattern, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::regex re(pattern);
    std::unique_lock lock(mutex_);
    std::smatch match;
    bool found =
        changed_.wait_for(lock, timeout, [&] { return std::regex_search(output_, match, re) || eof_; });
    if (!found || !std::regex_search(output_, match, re)) {
      throw std::runtime_error("child never printed /" + pattern + "/; output:\n" + output_);
    }
    return match.size() > 1 ? match[1].str() : match[0].str();
  }

  void signal(int number) const { kill(pid_, number); }

  // Waits for the process, then for the last of its output.
  int wait_exit() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    kill(-pid_, SIGKILL);  // anything it left in its group holds the pipe open
    if (reader_.joinable()) reader_.join();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

  std::string output() {
    std::lock_guard lock(mutex_);
    return output_;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string output_;
  bool eof_ = false;
};

}  // namespace kw::testing
