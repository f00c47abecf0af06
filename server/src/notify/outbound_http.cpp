#include "notify/outbound_http.hpp"

#include <openssl/hmac.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <functional>
#include <stdexcept>

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

}  // namespace

OutboundResponse post_json(const std::string& url_text, const std::string& body,
                           const std::map<std::string, std::string>& headers, OutboundTimeouts timeouts) {
  Url url = parse_url(url_text);
  net::io_context io;
  tcp::resolver resolver(io);
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + timeouts.total;
  auto request = make_request(url, body, headers);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code failure;
  std::string step = "resolve";
  // Configured before the stream: its SSL object copies the verify mode when made.
  ssl::context context(ssl::context::tls_client);
  if (url.tls) {
    context.set_default_verify_paths();
    context.set_verify_mode(ssl::verify_peer);
  }
  beast::ssl_stream<beast::tcp_stream> tls_stream(io, context);
  beast::tcp_stream& plain = beast::get_lowest_layer(tls_stream);
  auto finish = [&](beast::error_code ec) {
    failure = ec;
    io.stop();
  };
  auto on_read = [&](beast::error_code ec, std::size_t) { finish(ec); };
  auto on_written = [&](beast::error_code ec, std::size_t) {
    if (ec) return finish(ec);
    step = "read the answer";
    plain.expires_at(deadline);
    if (url.tls)
      http::async_read(tls_stream, buffer, response, on_read);
    else
      http::async_read(plain, buffer, response, on_read);
  };
  auto send = [&] {
    step = "send";
    plain.expires_at(deadline);
    if (url.tls)
      http::async_write(tls_stream, request, on_written);
    else
      http::async_write(plain, request, on_written);
  };
  auto on_connected = [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) return finish(ec);
    if (!url.tls) return send();
    step = "TLS handshake";
    plain.expires_at(deadline);
    tls_stream.async_handshake(ssl::stream_base::client, [&](beast::error_code handshake) {
      if (handshake) return finish(handshake);
      send();
    });
  };
  if (url.tls) {
    // SSL_set_tlsext_host_name, spelled out (the macro casts C-style).
    if (SSL_ctrl(tls_stream.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(url.host.c_str())) != 1) {
      throw std::runtime_error("cannot set TLS server name " + url.host);
    }
    tls_stream.set_verify_callback(ssl::host_name_verification(url.host));
  }
  resolver.async_resolve(
      url.host, url.port, [&](beast::error_code ec, const tcp::resolver::results_type& endpoints) {
        if (ec) return finish(ec);
        step = "connect";
        plain.expires_at(std::min(deadline, std::chrono::steady_clock::now() + timeouts.connect));
        plain.async_connect(endpoints, on_connected);
      });
  try {
    run_until(io, deadline, [&] {
      resolver.cancel();
      plain.close();
    });
  } catch (const std::runtime_error&) {
    throw std::runtime_error("POST " + url_text + ": timed out after " +
                             std::to_string(timeouts.total.count()) + " s (" + step + ")");
  }
  if (failure) {
    const bool expired = failure == beast::error::timeout;
    throw std::runtime_error("POST " + url_text + ": " + step + ": " +
                             (expired && step == "connect"
                                  ? "timed out after " + std::to_string(timeouts.connect.count()) + " s"
                                  : failure.message()));
  }
  beast::error_code ignored;
  plain.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return {static_cast<int>(response.result_int()), response.body()};
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
