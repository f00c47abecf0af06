#include "kw/http/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#if KW_HTTP_TLS
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#endif

#include "kw/http/gzip.hpp"

namespace kw::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Client::Connection {
  net::io_context io;
  std::optional<beast::tcp_stream> plain;
#if KW_HTTP_TLS
  // Made once per client: loading the system's CA certificates is the slow part.
  std::optional<net::ssl::context> tls;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
#endif
  bool open = false;

  beast::tcp_stream& tcp() {
#if KW_HTTP_TLS
    if (secure) return beast::get_lowest_layer(*secure);
#endif
    return *plain;
  }
  void close() {
    beast::error_code ec;
    if (open) tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    if (plain) plain->socket().close(ec);
#if KW_HTTP_TLS
    if (secure) beast::get_lowest_layer(*secure).socket().close(ec);
    secure.reset();
#endif
    plain.reset();
    open = false;
  }
};

namespace {

Response exchange(auto& stream, const bhttp::request<bhttp::string_body>& message, bool head,
                  bool& keep_alive) {
  bhttp::write(stream, message);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(1024ull * 1024 * 1024);
  if (head) parser.skip(true);
  bhttp::read(stream, buffer, parser);
  auto reply = parser.release();
  Response response;
  response.status = static_cast<int>(reply.result_int());
  response.body = std::move(reply.body());
  for (const auto& field : reply) {
    std::string name(field.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    response.headers[name] = std::string(field.value());
  }
  keep_alive = reply.keep_alive();
  return response;
}

}  // namespace

nlohmann::json Response::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error&) {
    throw std::runtime_error("HTTP " + std::to_string(status) +
                             " answer is not JSON: " + body.substr(0, 200));
  }
}

Client::Client(const std::string& base_url, std::string token, std::chrono::milliseconds timeout)
    : base_url_(base_url),
      token_(std::move(token)),
      timeout_(timeout),
      connection_(std::make_unique<Connection>()) {
  std::string_view scheme = "http://";
  if (base_url.rfind("https://", 0) == 0) {
    scheme = "https://";
    tls_ = true;
#if !KW_HTTP_TLS
    throw std::invalid_argument("this kw was built without OpenSSL and cannot reach " + base_url +
                                "; use an http:// URL or a kw built with libssl-dev installed");
#endif
  } else if (base_url.rfind(scheme, 0) != 0) {
    throw std::invalid_argument("server URL must start with http:// or https://, got \"" + base_url + "\"");
  }
  std::string rest = base_url.substr(scheme.size());
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  prefix_ = slash == std::string::npos ? "" : rest.substr(slash);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  auto colon = authority.rfind(':');
  if (colon == std::string::npos || authority.back() == ']') {
    host_ = authority;
    port_ = tls_ ? "443" : "80";
  } else {
    host_ = authority.substr(0, colon);
    port_ = authority.substr(colon + 1);
  }
  if (host_.size() > 2 && host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
  if (host_.empty()) throw std::invalid_argument("server URL has no host: \"" + base_url + "\"");
}

Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

Response Client::request(const std::string& method, const std::string& target, const std::string& body,
                         const std::map<std::string, std::string>& headers) {
  Connection& c = *connection_;
  // One retry on a fresh connection: the server may have closed an idle
  // keep-alive connection between our requests.
  for (int attempt = 0;; ++attempt) {
    bool reused = c.open;
    try {
      if (!c.open) connect();
      bhttp::request<bhttp::string_body> message(bhttp::string_to_verb(method), prefix_ + target, 11);
      message.set(bhttp::field::host, host_);
      message.set(bhttp::field::user_agent, "kw");
      message.keep_alive(true);
      if (!token_.empty()) message.set(bhttp::field::authorization, "Bearer " + token_);
      for (const auto& [name, value] : headers) message.set(name, value);
      if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
        if (message[bhttp::field::content_type].empty())
          message.set(bhttp::field::content_type, "application/json");
        message.body() = body;
        message.prepare_payload();
      }
      c.tcp().expires_after(timeout_);
      bool keep_alive = false;
      Response response;
#if KW_HTTP_TLS
      if (c.secure)
        response = exchange(*c.secure, message, method == "HEAD", keep_alive);
      else
#endif
        response = exchange(*c.plain, message, method == "HEAD", keep_alive);
      if (!keep_alive) c.close();
      return response;
    } catch (const boost::system::system_error& error) {
      c.close();
      if (reused && attempt == 0) continue;
      throw ConnectionError("cannot reach " + base_url_ + " (" + method + " " + target +
                            "): " + error.code().message());
    }
  }
}

void Client::connect() {
  Connection& c = *connection_;
  tcp::resolver resolver(c.io);
  auto endpoints = resolver.resolve(host_, port_);
  if (!tls_) {
    c.plain.emplace(c.io);
    c.plain->expires_after(timeout_);
    c.plain->connect(endpoints);
    // A request goes out as header + body writes: no Nagle delay between them.
    c.plain->socket().set_option(tcp::no_delay(true));
    c.open = true;
    return;
  }
#if KW_HTTP_TLS
  if (!c.tls) {
    c.tls.emplace(net::ssl::context::tls_client);
    // The system's CA certificates; SSL_CERT_FILE / SSL_CERT_DIR point elsewhere.
    c.tls->set_default_verify_paths();
    c.tls->set_verify_mode(net::ssl::verify_peer);
  }
  c.secure.emplace(c.io, *c.tls);
  // SSL_set_tlsext_host_name, spelled out (the macro casts C-style).
  if (SSL_ctrl(c.secure->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(host_.c_str())) != 1) {
    throw ConnectionError("cannot set the TLS server name " + host_);
  }
  c.secure->set_verify_callback(net::ssl::host_name_verification(host_));
  auto& lowest = beast::get_lowest_layer(*c.secure);
  lowest.expires_after(timeout_);
  lowest.connect(endpoints);
  lowest.socket().set_option(tcp::no_delay(true));
  c.open = true;
  c.secure->handshake(net::ssl::stream_base::client);
#endif
}

Response Client::post_gzip(const std::string& target, const nlohmann::json& body) {
  return request("POST", target, gzip_compress(body.dump()), {{"Content-Encoding", "gzip"}});
}

std::string url_encode(const std::string& text) {
  static const char* digits = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

}  // namespace kw::http
