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

// Throws std::runtime_error on connection or TLS failure (never for an HTTP
// status).
OutboundResponse post_json(const std::string& url, const std::string& body,
                           const std::map<std::string, std::string>& headers,
                           std::chrono::seconds timeout = std::chrono::seconds(15));

std::string hmac_sha256_hex(const std::string& key, const std::string& data);

}  // namespace kw::server
