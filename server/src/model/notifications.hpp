// How notifications are sent (the server's options) and how their targets
// fare.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kw::server {

// Both apply to every attempt: a target that accepts and never answers is
// given up on at `total`, one that does not accept at `connect`.
struct OutboundTimeouts {
  std::chrono::seconds connect{5};
  std::chrono::seconds total{15};
};

struct TargetHealth {
  std::string target;
  int consecutive_failures = 0;
  bool paused = false;
};

struct OutboxHealth {
  std::int64_t pending = 0;
  std::vector<TargetHealth> failing;
};

// When a target is paused: after this many failed attempts in a row, for
// this long; then it is tried again.
struct TargetPolicy {
  int pause_after_failures = 5;
  double pause_seconds = 600;
};

struct NotifierOptions {
  std::string github_api = "https://api.github.com";
  std::string github_token;  // statuses are sent only when set
  std::string gitlab_api = "https://gitlab.com/api/v4";
  std::string gitlab_token;    // PRIVATE-TOKEN (api scope); statuses are sent only when set
  std::string webhook_secret;  // signs webhook bodies (X-Kernelwatch-Signature-256)
  std::string public_url;      // base of links in statuses and webhooks
  int max_attempts = 8;
  double poll_seconds = 0.5;
  // Deliveries run on this many threads, each target on one at a time, so a
  // target that hangs holds one thread for at most `timeouts.total`.
  int workers = 4;
  OutboundTimeouts timeouts;
  TargetPolicy target_policy;
  // Webhooks may reach loopback and private addresses (an on-premises forge
  // or receiver); off, a project admin cannot make kw-server call into its
  // own network.
  bool allow_private_webhooks = false;
};

}  // namespace kw::server
