// Outbound HTTP(S) POSTs for notifications (GitHub's API is https; a local
// webhook receiver may be plain http), on kernelwatch's one HTTP client
// (common/kw/http/client.hpp). Peer certificates are verified.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <map>
#include <string>

#include "model/notifications.hpp"
#include "model/webhook_address.hpp"

namespace kw::server {

struct OutboundResponse {
  int status = 0;
  std::string body;
};

// Where an outbound POST may connect. A project admin names a webhook's URL,
// so a webhook reaches public addresses only: the host is resolved, and only
// its public addresses are connected to (the addresses checked are the ones
// connected to, so a DNS answer that changes in between gains nothing).
enum class Reach { any, public_only };

// Throws std::runtime_error on connection or TLS failure or a timeout (never
// for an HTTP status), with a short reason ("connect: Connection refused")
// that names neither the URL nor anything the target answered. The answer's
// body is read up to 64 KiB.
OutboundResponse post_json(const std::string& url, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts = {},
                           Reach reach = Reach::any);

}  // namespace kw::server
