#include "notify/outbound_http.hpp"

#include "model/webhook_address.hpp"

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
