#include "kw/http/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <vector>
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
  tcp::resolver resolver{io};
  std::optional<beast::tcp_stream> plain;
#if KW_HTTP_TLS
  // Made once per client: loading the system's CA certificates is the slow part.
  std::optional<net::ssl::context> tls;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
#endif
  bool open = false;

  beast::tcp_stream& lowest() {
#if KW_HTTP_TLS
    if (secure) return beast::get_lowest_layer(*secure);
#endif
    return *plain;
  }
  void close() {
    beast::error_code ec;
    if (open) lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    if (plain) plain->socket().close(ec);
#if KW_HTTP_TLS
    if (secure) beast::get_lowest_layer(*secure).socket().close(ec);
    secure.reset();
#endif
    plain.reset();
    open = false;
  }

  // Ends whatever operation is pending: it completes with an error.
  void cancel() {
    resolver.cancel();
    beast::error_code ignored;
    if (plain) plain->socket().close(ignored);
#if KW_HTTP_TLS
    if (secure) beast::get_lowest_layer(*secure).socket().close(ignored);
#endif
  }

  // One step of a request: `start` begins an asynchronous operation that
  // ends by calling the handler it is given; it runs until that or until
  // `deadline`, when the operation is cancelled.
  template <typename Start>
  void step(const char* name, std::chrono::steady_clock::time_point deadline, Start start) {
    beast::error_code result;
    bool expired = false;
    net::steady_timer timer(io, deadline);
    timer.async_wait([&](beast::error_code ec) {
      if (ec) return;
      expired = true;
      cancel();
    });
    start([&](beast::error_code ec) {
      result = ec;
      timer.cancel();
    });
    io.restart();
    io.run();
    if (expired) throw ConnectionError(std::string(name) + ": timed out", name, "timed out", true);
    if (result) throw ConnectionError(std::string(name) + ": " + result.message(), name, result.message());
  }

  // Sends `message` and reads the answer, each step by its own deadline.
  template <typename Stream, typename Deadline>
  Response exchange(Stream& stream, const bhttp::request<bhttp::string_body>& message, bool head,
                    std::size_t answer_limit, const Deadline& deadline, bool& keep_alive) {
    step("send", deadline(), [&](auto done) {
      bhttp::async_write(stream, message, [done](beast::error_code ec, std::size_t) mutable { done(ec); });
    });
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(answer_limit);
    if (head) parser.skip(true);
    step("read the answer", deadline(), [&](auto done) {
      bhttp::async_read(stream, buffer, parser,
                        [done](beast::error_code ec, std::size_t) mutable { done(ec); });
    });
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
};

nlohmann::json Response::json() const {
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error&) {
    throw std::runtime_error("HTTP " + std::to_string(status) +
                             " answer is not JSON: " + body.substr(0, 200));
  }
}

Client::Client(const std::string& base_url, std::string token, std::chrono::milliseconds timeout)
    : Client(base_url, std::move(token), [timeout] {
        ClientOptions options;
        options.timeout = timeout;
        return options;
      }()) {}

Client::Client(const std::string& base_url, std::string token, ClientOptions options)
    : base_url_(base_url),
      token_(std::move(token)),
      options_(std::move(options)),
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

std::chrono::steady_clock::time_point Client::deadline(std::chrono::milliseconds limit,
                                                       std::chrono::steady_clock::time_point started) const {
  const auto by = std::chrono::steady_clock::now() + limit;
  return options_.total.count() > 0 ? std::min(by, started + options_.total) : by;
}

Response Client::request(const std::string& method, const std::string& target, const std::string& body,
                         const std::map<std::string, std::string>& headers) {
  Connection& c = *connection_;
  const auto started = std::chrono::steady_clock::now();
  // One retry on a fresh connection: the server may have closed an idle
  // keep-alive connection between our requests.
  for (int attempt = 0;; ++attempt) {
    const bool reused = c.open;
    try {
      if (!c.open) connect(started);
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
      const bool head = method == "HEAD";
      auto step_deadline = [&] { return deadline(options_.timeout, started); };
      bool keep_alive = false;
      Response response;
#if KW_HTTP_TLS
      if (c.secure)
        response = c.exchange(*c.secure, message, head, options_.answer_limit, step_deadline, keep_alive);
      else
#endif
        response = c.exchange(*c.plain, message, head, options_.answer_limit, step_deadline, keep_alive);
      if (!keep_alive) c.close();
      return response;
    } catch (const ConnectionError& error) {
      c.close();
      if (reused && attempt == 0 && !error.timed_out()) continue;
      throw ConnectionError("cannot reach " + base_url_ + " (" + method + " " + target + "): " + error.what(),
                            error.step(), error.reason(), error.timed_out());
    }
  }
}

void Client::connect(std::chrono::steady_clock::time_point started) {
  Connection& c = *connection_;
  const auto connect_by =
      deadline(options_.connect_timeout.count() > 0 ? options_.connect_timeout : options_.timeout, started);
  std::vector<tcp::endpoint> endpoints;
  c.step("resolve", connect_by, [&](auto done) {
    c.resolver.async_resolve(
        host_, port_, [&, done](beast::error_code ec, const tcp::resolver::results_type& found) mutable {
          for (const auto& entry : found) {
            if (!options_.may_connect || options_.may_connect(entry.endpoint().address()))
              endpoints.push_back(entry.endpoint());
          }
          done(ec);
        });
  });
  if (endpoints.empty())
    throw ConnectionError("refused: no address it may connect to", "refused", "no address");
  beast::tcp_stream* stream = nullptr;
  if (!tls_) {
    stream = &c.plain.emplace(c.io);
  } else {
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
      throw ConnectionError("cannot set the TLS server name " + host_, "TLS handshake", "server name");
    }
    c.secure->set_verify_callback(net::ssl::host_name_verification(host_));
    stream = &beast::get_lowest_layer(*c.secure);
#endif
  }
  c.step("connect", connect_by, [&](auto done) {
    stream->async_connect(endpoints,
                          [done](beast::error_code ec, const tcp::endpoint&) mutable { done(ec); });
  });
  // A request goes out as header + body writes: no Nagle delay between them.
  stream->socket().set_option(tcp::no_delay(true));
  c.open = true;
#if KW_HTTP_TLS
  if (c.secure) {
    c.step("TLS handshake", deadline(options_.timeout, started), [&](auto done) {
      c.secure->async_handshake(net::ssl::stream_base::client,
                                [done](beast::error_code ec) mutable { done(ec); });
    });
  }
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
