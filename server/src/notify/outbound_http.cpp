#include "notify/outbound_http.hpp"

#include <openssl/hmac.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <stdexcept>
#include <vector>

namespace kw::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

struct Url {
  bool tls = false;
  std::string host, port, target;
};

Url parse_url(const std::string& url) {
  Url parsed;
  std::string rest;
  if (url.rfind("https://", 0) == 0) {
    parsed.tls = true;
    rest = url.substr(8);
  } else if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else {
    throw std::runtime_error("unsupported URL (need http:// or https://): " + url);
  }
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  parsed.target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = authority.rfind(':');
  if (colon != std::string::npos && authority.back() != ']') {
    parsed.host = authority.substr(0, colon);
    parsed.port = authority.substr(colon + 1);
  } else {
    parsed.host = authority;
    parsed.port = parsed.tls ? "443" : "80";
  }
  return parsed;
}

http::request<http::string_body> make_request(const Url& url, const std::string& body,
                                              const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> request(http::verb::post, url.target, 11);
  request.set(http::field::host, url.host);
  request.set(http::field::user_agent, "kernelwatch");
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  return request;
}

// Runs `io` until its work is done or `deadline` passes; then `cancel`
// closes the socket, and what was pending completes with an error. Every
// step is asynchronous: Beast's stream timeouts apply only to those.
void run_until(net::io_context& io, std::chrono::steady_clock::time_point deadline,
               const std::function<void()>& cancel) {
  net::steady_timer timer(io, deadline);
  bool expired = false;
  timer.async_wait([&](beast::error_code ec) {
    if (ec) return;
    expired = true;
    cancel();
  });
  // The timer keeps run() going; it ends once the exchange's handler stops it.
  io.run();
  if (expired) throw std::runtime_error("timed out");
}

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

// The addresses of `endpoints` a POST may connect to.
std::vector<tcp::endpoint> reachable(const tcp::resolver::results_type& endpoints, Reach reach);

// Why an attempt failed, in a few words that name neither the URL nor
// anything the target said.
[[noreturn]] void throw_failure(bool refused_private, const beast::error_code& failure,
                                const std::string& step, const OutboundTimeouts& timeouts) {
  if (refused_private) {
    throw std::runtime_error(
        "refused: the host resolves only to loopback, private or link-local addresses "
        "(kw-server --allow-private-webhooks allows them)");
  }
  const bool expired = failure == beast::error::timeout;
  throw std::runtime_error(step + ": " +
                           (expired && step == "connect"
                                ? "timed out after " + std::to_string(timeouts.connect.count()) + " s"
                                : failure.message()));
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

namespace {

std::vector<tcp::endpoint> reachable(const tcp::resolver::results_type& endpoints, Reach reach) {
  std::vector<tcp::endpoint> allowed;
  for (const auto& entry : endpoints) {
    if (reach == Reach::any || !is_private_address(entry.endpoint().address()))
      allowed.push_back(entry.endpoint());
  }
  return allowed;
}

}  // namespace

std::string private_host_problem(const std::string& url) {
  std::string host;
  try {
    host = parse_url(url).host;
  } catch (const std::exception&) {
    return {};  // the URL's own check names what is wrong with it
  }
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

namespace {

// One POST on its own io_context, in the steps of a Beast client: resolve
// (public addresses only, unless `reach` allows private ones), connect, TLS
// handshake where https, send, read the answer; `step` names the one under
// way when it fails or the deadline passes.
class Exchange {
 public:
  Exchange(const Url& url, const std::string& body, const std::map<std::string, std::string>& headers,
           OutboundTimeouts timeouts, Reach reach)
      : url_(url),
        timeouts_(timeouts),
        reach_(reach),
        deadline_(std::chrono::steady_clock::now() + timeouts.total),
        request_(make_request(url, body, headers)),
        context_(make_context(url)),
        tls_stream_(io_, context_),
        plain_(beast::get_lowest_layer(tls_stream_)) {
    response_.body_limit(std::size_t{64} * 1024);
    if (url.tls) {
      // SSL_set_tlsext_host_name, spelled out (the macro casts C-style).
      if (SSL_ctrl(tls_stream_.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                   const_cast<char*>(url.host.c_str())) != 1) {
        throw std::runtime_error("cannot set TLS server name " + url.host);
      }
      tls_stream_.set_verify_callback(ssl::host_name_verification(url.host));
    }
  }

  OutboundResponse run() {
    resolver_.async_resolve(url_.host, url_.port,
                            [this](beast::error_code ec, const tcp::resolver::results_type& endpoints) {
                              on_resolved(ec, endpoints);
                            });
    try {
      run_until(io_, deadline_, [this] {
        resolver_.cancel();
        plain_.close();
      });
    } catch (const std::runtime_error&) {
      throw std::runtime_error("timed out after " + std::to_string(timeouts_.total.count()) + " s (" + step_ +
                               ")");
    }
    if (refused_private_ || failure_) throw_failure(refused_private_, failure_, step_, timeouts_);
    beast::error_code ignored;
    plain_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return {static_cast<int>(response_.get().result_int()), response_.get().body()};
  }

 private:
  // Configured before the stream: its SSL object copies the verify mode when made.
  static ssl::context make_context(const Url& url) {
    ssl::context context(ssl::context::tls_client);
    if (url.tls) {
      context.set_default_verify_paths();
      context.set_verify_mode(ssl::verify_peer);
    }
    return context;
  }

  void finish(beast::error_code ec) {
    failure_ = ec;
    io_.stop();
  }

  void on_resolved(beast::error_code ec, const tcp::resolver::results_type& endpoints) {
    if (ec) return finish(ec);
    std::vector<tcp::endpoint> allowed = reachable(endpoints, reach_);
    if (allowed.empty()) {
      step_ = "refused";
      refused_private_ = true;
      return finish(net::error::host_unreachable);
    }
    step_ = "connect";
    plain_.expires_at(std::min(deadline_, std::chrono::steady_clock::now() + timeouts_.connect));
    plain_.async_connect(
        allowed, [this](beast::error_code connected, const tcp::endpoint&) { on_connected(connected); });
  }

  void on_connected(beast::error_code ec) {
    if (ec) return finish(ec);
    if (!url_.tls) return send();
    step_ = "TLS handshake";
    plain_.expires_at(deadline_);
    tls_stream_.async_handshake(ssl::stream_base::client, [this](beast::error_code handshake) {
      if (handshake) return finish(handshake);
      send();
    });
  }

  void send() {
    step_ = "send";
    plain_.expires_at(deadline_);
    auto written = [this](beast::error_code ec, std::size_t) { on_written(ec); };
    if (url_.tls)
      http::async_write(tls_stream_, request_, written);
    else
      http::async_write(plain_, request_, written);
  }

  void on_written(beast::error_code ec) {
    if (ec) return finish(ec);
    step_ = "read the answer";
    plain_.expires_at(deadline_);
    auto read = [this](beast::error_code done, std::size_t) { finish(done); };
    if (url_.tls)
      http::async_read(tls_stream_, buffer_, response_, read);
    else
      http::async_read(plain_, buffer_, response_, read);
  }

  const Url& url_;
  OutboundTimeouts timeouts_;
  Reach reach_;
  std::chrono::steady_clock::time_point deadline_;
  http::request<http::string_body> request_;
  net::io_context io_;
  tcp::resolver resolver_{io_};
  ssl::context context_;
  beast::ssl_stream<beast::tcp_stream> tls_stream_;
  beast::tcp_stream& plain_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> response_;
  beast::error_code failure_;
  std::string step_ = "resolve";
  bool refused_private_ = false;
};

}  // namespace

OutboundResponse post_json(const std::string& url_text, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts,
                           Reach reach) {
  const Url url = parse_url(url_text);
  return Exchange(url, body, headers, timeouts, reach).run();
}

std::string hmac_sha256_hex(const std::string& key, const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &length) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(digits[digest[i] >> 4]);
    hex.push_back(digits[digest[i] & 15]);
  }
  return hex;
}

}  // namespace kw::server
