// Outbound HTTP(S) POSTs for notifications (GitHub's API is https; a local
// webhook receiver may be plain http). Peer certificates are verified.
#pragma once

#include <boost/asio/ip/address.hpp>

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

// Where an outbound POST may connect. A project admin names a webhook's URL,
// so a webhook reaches public addresses only: the host is resolved, and only
// its public addresses are connected to (the addresses checked are the ones
// connected to, so a DNS answer that changes in between gains nothing).
enum class Reach { any, public_only };

// Loopback, private (RFC 1918, CGNAT), link-local, unique-local, multicast,
// reserved and unspecified addresses, and IPv6 forms that embed one
// (v4-mapped, NAT64, 6to4).
bool is_private_address(const boost::asio::ip::address& address);

// Why a webhook URL names a host no public webhook has: an address in any
// form inet_aton or IPv6 reads ("127.1", "2130706433", "[::1]") that is
// private, or a name such as localhost or *.internal. Empty when none.
std::string private_host_problem(const std::string& url);

// Throws std::runtime_error on connection or TLS failure or a timeout (never
// for an HTTP status), with a short reason ("connect: Connection refused")
// that names neither the URL nor anything the target answered. The answer's
// body is read up to 64 KiB.
OutboundResponse post_json(const std::string& url, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts = {},
                           Reach reach = Reach::any);

std::string hmac_sha256_hex(const std::string& key, const std::string& data);

}  // namespace kw::server
