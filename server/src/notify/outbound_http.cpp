#include "notify/outbound_http.hpp"

#include <openssl/hmac.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
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

template <typename Stream>
OutboundResponse exchange(Stream& stream, const Url& url, const std::string& body,
                          const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> request(http::verb::post, url.target, 11);
  request.set(http::field::host, url.host);
  request.set(http::field::user_agent, "kernelwatch");
  request.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  request.prepare_payload();
  http::write(stream, request);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  http::read(stream, buffer, response);
  return {static_cast<int>(response.result_int()), response.body()};
}

}  // namespace

OutboundResponse post_json(const std::string& url_text, const std::string& body,
                           const std::map<std::string, std::string>& headers, std::chrono::seconds timeout) {
  Url url = parse_url(url_text);
  net::io_context io;
  tcp::resolver resolver(io);
  try {
    auto endpoints = resolver.resolve(url.host, url.port);
    if (!url.tls) {
      beast::tcp_stream stream(io);
      stream.expires_after(timeout);
      stream.connect(endpoints);
      OutboundResponse response = exchange(stream, url, body, headers);
      beast::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
      return response;
    }
    ssl::context context(ssl::context::tls_client);
    context.set_default_verify_paths();
    context.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(io, context);
    // SSL_set_tlsext_host_name, spelled out (the macro casts C-style).
    if (SSL_ctrl(stream.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(url.host.c_str())) != 1) {
      throw std::runtime_error("cannot set TLS server name " + url.host);
    }
    stream.set_verify_callback(ssl::host_name_verification(url.host));
    beast::get_lowest_layer(stream).expires_after(timeout);
    beast::get_lowest_layer(stream).connect(endpoints);
    stream.handshake(ssl::stream_base::client);
    OutboundResponse response = exchange(stream, url, body, headers);
    beast::error_code ec;
    stream.shutdown(ec);
    return response;
  } catch (const boost::system::system_error& error) {
    throw std::runtime_error("POST " + url_text + ": " + error.code().message());
  }
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
