// Reports waiting for the server: one file each under DIR/spool, written
// atomically, delivered with backoff until the server accepts them (the
// server stores a report once, so a resend after a crash is harmless; a large
// one goes in parts, and a resend sends only those the server lacks), moved
// to DIR/spool/rejected when the server refuses them for good.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "kw/http/client.hpp"

namespace kw::agent {

class Spool {
 public:
  explicit Spool(std::filesystem::path dir);

  // `target`: the server path the report goes to ("/api/v1/jobs/17/report").
  std::filesystem::path add(const std::string& name, const std::string& target, const nlohmann::json& report);

  // Tries each pending report whose backoff has passed; returns how many are
  // still pending.
  std::size_t deliver(http::Client& client, const std::function<void(const std::string&)>& log);
  std::size_t pending() const;
  // The server answers again: the next deliver() tries at once each report
  // that waits because the server could not be reached, not after its
  // backoff (up to 5 minutes after an outage). One the server answered with
  // an error keeps its backoff. Returns how many it cut short.
  std::size_t retry_now() {
    return std::erase_if(backoff_, [](const auto& entry) { return entry.second.unreachable; });
  }

 private:
  struct Backoff {
    int attempts = 0;
    std::chrono::steady_clock::time_point next{};
    bool unreachable = false;  // the last attempt reached no server
  };
  std::filesystem::path dir_;
  std::map<std::string, Backoff> backoff_;
};

}  // namespace kw::agent
