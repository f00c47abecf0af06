// A kw-server process on its own embedded PostgreSQL at a fixed loopback
// port (so it can be stopped and restarted under agents), with tokens and
// projects made the way an admin makes them.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include <gtest/gtest.h>

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
  // Port 0: the kernel picks a free one, which getsockname reads back.
  const bool bound = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                     getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) close(fd);
  if (!bound) throw std::runtime_error("free_port: no loopback port to bind");
  return ntohs(address.sin_port);
}

class ServerUnderTest {
 public:
  // `binary`: the kw-server to run (the build's, or one a package installed).
  explicit ServerUnderTest(std::vector<std::string> extra_args = {}, std::string binary = KW_SERVER_BINARY)
      : binary_(std::move(binary)),
        data_dir_(make_cluster_dir("kw-e2e-server")),
        port_(free_port()),
        extra_(std::move(extra_args)) {
    copy_seed();
  }
  ~ServerUnderTest() {
    process_.reset();
    // Stops the cluster a killed server may have left running.
    run_command({binary_, "token", "list", "--data-dir", data_dir_.string()});
    std::error_code ec;
    fs::remove_all(data_dir_, ec);
  }

  void start() {
    std::vector<std::string> argv = {binary_, "--data-dir", data_dir_.string(), "--listen",
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
    auto result = run_command(
        {binary_, "token", "create", "--data-dir", data_dir_.string(), "--scope", scope, "--name", name});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::string text = result.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text.substr(text.rfind('\n') + 1);
  }
  // An admin's act: projects are not made by the first report.
  void project(const std::string& name) {
    auto result = run_command({binary_, "project", "create", "--data-dir", data_dir_.string(), name});
    EXPECT_EQ(result.exit_code, 0) << result.output;
  }
  http::Client client(const std::string& token = {}) const { return http::Client(url(), token); }

 private:
  // The cluster ctest's kw_server_seed fixture made with this build's
  // kw-server (KW_TEST_SERVER_SEED), copied with its owner and modes, so that
  // the server starts on a migrated cluster instead of running initdb. A
  // server other than the build's (a package's) makes its own.
  void copy_seed() {
    const char* seed = std::getenv("KW_TEST_SERVER_SEED");
    if (seed == nullptr || *seed == '\0' || binary_ != KW_SERVER_BINARY) return;
    if (!fs::exists(fs::path(seed) / "postgres" / "PG_VERSION")) return;
    const auto copied = run_command({"cp", "-a", std::string(seed) + "/.", data_dir_.string()});
    if (copied.exit_code != 0)
      throw std::runtime_error("copying the seed cluster " + std::string(seed) + ": " + copied.output);
  }

  std::string binary_;
  fs::path data_dir_;
  int port_;
  std::vector<std::string> extra_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace kw::testing
