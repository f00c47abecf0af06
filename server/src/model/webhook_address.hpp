// Where a webhook may not point: the addresses and names of a private
// network. A project admin names a webhook's URL; kw-server refuses one that
// names such a host and connects only to public addresses.
#pragma once

#include <string>

#include <boost/asio/ip/address.hpp>

namespace kw::server {

// Loopback, private (RFC 1918, CGNAT), link-local, unique-local, multicast,
// reserved and unspecified addresses, and IPv6 forms that embed one
// (v4-mapped, NAT64, 6to4).
bool is_private_address(const boost::asio::ip::address& address);

// Why a webhook URL names a host no public webhook has: an address in any
// form inet_aton or IPv6 reads ("127.1", "2130706433", "[::1]") that is
// private, or a name such as localhost or *.internal. Empty when none.
std::string private_host_problem(const std::string& url);

}  // namespace kw::server
