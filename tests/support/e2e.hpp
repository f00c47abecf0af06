// End-to-end helpers: a kw-server process on its own embedded PostgreSQL at a
// fixed loopback port (so it can be stopped and restarted under agents), a
// temporary git repository standing for a tracked CUDA repo, and tokens.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "kw/http/client.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace kw::testing {

namespace fs = std::filesystem;

inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  int port = ntohs(address.sin_port);
  close(fd);
  return port;
}

class ServerUnderTest {
 public:
  explicit ServerUnderTest(std::vector<std::string> extra_args = {})
      : data_dir_(make_temp_dir("kw-e2e-server")), port_(free_port()), extra_(std::move(extra_args)) {}
  ~ServerUnderTest() {
    process_.reset();
    // Stops the cluster a killed server may have left running.
    run_command({KW_SERVER_BINARY, "token", "list", "--data-dir", data_dir_.string()});
    std::error_code ec;
    fs::remove_all(data_dir_, ec);
  }

  void start() {
    std::vector<std::string> argv = {KW_SERVER_BINARY, "--data-dir", data_dir_.string(), "--listen",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    process_ = std::make_unique<ChildProcess>(argv);
    process_->wait_for("listening on http://");
  }
  void stop() {
    process_->signal(SIGTERM);
    process_->wait_exit();
    process_.reset();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string token(const std::string& scope, const std::string& name) {
    auto result = run_command({KW_SERVER_BINARY, "token", "create", "--data-dir", data_dir_.string(),
                               "--scope", scope, "--name", name});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::string text = result.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text.substr(text.rfind('\n') + 1);
  }
  // An admin's act: projects are not made by the first report.
  void project(const std::string& name) {
    auto result =
        run_command({KW_SERVER_BINARY, "project", "create", "--data-dir", data_dir_.string(), name});
    EXPECT_EQ(result.exit_code, 0) << result.output;
  }
  http::Client client(const std::string& token = {}) const { return http::Client(url(), token); }

 private:
  fs::path data_dir_;
  int port_;
  std::vector<std::string> extra_;
  std::unique_ptr<ChildProcess> process_;
};

// A git repository whose kernelwatch.json runs the kwbench CPU test double.
class TrackedRepo {
 public:
  TrackedRepo() : dir_(make_temp_dir("kw-e2e-repo")) {
    git({"init", "-q", "-b", "main"});
    git({"config", "user.email", "ci@example.invalid"});
    git({"config", "user.name", "kernelwatch tests"});
    nlohmann::json config{{"project", "demo"},
                          {"build", {{"commands", {"sh build.sh"}}, {"timeout_s", 60}}},
                          {"benches", {{{"name", "fake"}, {"path", KW_FAKE_BENCH}, {"format", "kwbench"}}}}};
    write("kernelwatch.json", config.dump(2));
    write("build.sh", "echo building\n");
    write("kwbench-fake.json", "{}");
  }
  ~TrackedRepo() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  // Commits the working tree; returns the commit SHA.
  std::string commit(const std::string& message) {
    git({"add", "-A"});
    git({"commit", "-q", "-m", message});
    std::string sha = git({"rev-parse", "HEAD"});
    return sha.substr(0, 40);
  }
  std::string git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/git", "-C", dir_.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = run_command(argv);
    if (result.exit_code != 0) throw std::runtime_error("git failed: " + result.output);
    return result.output;
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// Polls GET /api/v1/jobs/ID until `done(job)` or the timeout.
inline nlohmann::json wait_for_job(const ServerUnderTest& server, std::int64_t job,
                                   const std::function<bool(const nlohmann::json&)>& done,
                                   std::chrono::seconds timeout = std::chrono::seconds(90)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  nlohmann::json last;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      auto response = server.client().get("/api/v1/jobs/" + std::to_string(job));
      if (response.status == 200) {
        last = response.json();
        if (done(last)) return last;
      }
    } catch (const http::ConnectionError&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ADD_FAILURE() << "job " << job << " never reached the expected state; last: " << last.dump();
  return last;
}

}  // namespace kw::testing
