// End-to-end helpers: the kw-server process (server_under_test.hpp) and a
// temporary git repository standing for a tracked CUDA repo.
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
#include "server_under_test.hpp"
#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace kw::testing {

namespace fs = std::filesystem;

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
