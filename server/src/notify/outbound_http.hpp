// Outbound HTTP(S) POSTs for notifications (GitHub's API is https; a local
// webhook receiver may be plain http). Peer certificates are verified.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace kw::server {

struct OutboundResponse {
  int status = 0;
  std::string body;
};

// Both apply to every attempt: a target that accepts and never answers is
// given up on at `total`, one that does not accept at `connect`.
struct OutboundTimeouts {
  std::chrono::seconds connect{5};
  std::chrono::seconds total{15};
};

// Throws std::runtime_error on connection or TLS failure or a timeout (never
// for an HTTP status).
OutboundResponse post_json(const std::string& url, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts = {});

std::string hmac_sha256_hex(const std::string& key, const std::string& data);

}  // namespace kw::server
