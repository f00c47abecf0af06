#include "model/webhook_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <string_view>

namespace kw::server {

namespace net = boost::asio;

namespace {

bool private_v4(const net::ip::address_v4& address) {
  const std::uint32_t ip = address.to_uint();
  auto in = [ip](std::uint32_t network, int bits) {
    const std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
    return (ip & mask) == network;
  };
  return in(0x00000000, 8) ||   // "this network", 0.0.0.0
         in(0x0A000000, 8) ||   // 10/8
         in(0x64400000, 10) ||  // 100.64/10, carrier-grade NAT
         in(0x7F000000, 8) ||   // loopback
         in(0xA9FE0000, 16) ||  // link-local, cloud metadata
         in(0xAC100000, 12) ||  // 172.16/12
         in(0xC0000000, 24) ||  // IETF protocol assignments
         in(0xC0A80000, 16) ||  // 192.168/16
         in(0xC6120000, 15) ||  // benchmarking
         in(0xE0000000, 4) ||   // multicast
         in(0xF0000000, 4);     // reserved, broadcast
}

}  // namespace

bool is_private_address(const net::ip::address& address) {
  if (address.is_v4()) return private_v4(address.to_v4());
  const net::ip::address_v6 v6 = address.to_v6();
  if (v6.is_loopback() || v6.is_unspecified() || v6.is_link_local() || v6.is_site_local() ||
      v6.is_multicast())
    return true;
  const auto bytes = v6.to_bytes();
  if ((bytes[0] & 0xfe) == 0xfc) return true;  // unique-local fc00::/7
  auto embedded = [&](std::size_t at) {
    return private_v4(net::ip::address_v4(
        net::ip::address_v4::bytes_type{bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]}));
  };
  if (v6.is_v4_mapped()) return embedded(12);
  const bool zero_prefix =
      std::all_of(bytes.begin(), bytes.begin() + 12, [](unsigned char b) { return b == 0; });
  if (zero_prefix) return embedded(12);  // IPv4-compatible
  const std::array<unsigned char, 12> nat64 = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::equal(nat64.begin(), nat64.end(), bytes.begin())) return embedded(12);
  if (bytes[0] == 0x20 && bytes[1] == 0x02) return embedded(2);  // 6to4
  return false;
}

std::string private_host_problem(const std::string& url) {
  std::string host;
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return {};  // the URL's own check names what is wrong with it
  const std::string authority = url.substr(scheme + 3, url.find('/', scheme + 3) - (scheme + 3));
  const std::size_t colon = authority.rfind(':');
  host = colon != std::string::npos && authority.back() != ']' ? authority.substr(0, colon) : authority;
  while (!host.empty() && host.back() == '.') host.pop_back();
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    boost::system::error_code ec;
    const auto v6 = net::ip::make_address_v6(host.substr(1, host.size() - 2), ec);
    if (!ec && is_private_address(net::ip::address(v6)))
      return "the host " + host + " is a loopback, private or link-local address";
    return {};
  }
  in_addr numeric{};
  if (inet_aton(host.c_str(), &numeric) != 0) {
    const net::ip::address_v4 v4(ntohl(numeric.s_addr));
    if (private_v4(v4))
      return "the host " + host + " is the address " + v4.to_string() +
             ", a loopback, private or link-local one";
    return {};
  }
  auto ends_with = [&](std::string_view suffix) {
    return host.size() >= suffix.size() &&
           host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (host == "localhost" || ends_with(".localhost") || ends_with(".local") || ends_with(".internal") ||
      ends_with(".home.arpa") || host.find('.') == std::string::npos)
    return "the host " + host + " is a local name, not a public one";
  return {};
}

}  // namespace kw::server
