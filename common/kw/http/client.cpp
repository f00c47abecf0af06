#include "kw/http/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace kw::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct Client::Connection {
  net::io_context io;
  beast::tcp_stream stream{io};
  bool open = false;
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
    : base_url_(base_url),
      token_(std::move(token)),
      timeout_(timeout),
      connection_(std::make_unique<Connection>()) {
  constexpr std::string_view scheme = "http://";
  if (base_url.rfind(scheme, 0) != 0) {
    throw std::invalid_argument("server URL must start with http://, got \"" + base_url + "\"");
  }
  std::string rest = base_url.substr(scheme.size());
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  prefix_ = slash == std::string::npos ? "" : rest.substr(slash);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  auto colon = authority.rfind(':');
  if (colon == std::string::npos || authority.back() == ']') {
    host_ = authority;
    port_ = "80";
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
      if (!c.open) {
        tcp::resolver resolver(c.io);
        c.stream.expires_after(timeout_);
        c.stream.connect(resolver.resolve(host_, port_));
        // A request goes out as header + body writes: no Nagle delay between them.
        c.stream.socket().set_option(tcp::no_delay(true));
        c.open = true;
      }
      bhttp::request<bhttp::string_body> message(bhttp::string_to_verb(method), prefix_ + target, 11);
      message.set(bhttp::field::host, host_);
      message.set(bhttp::field::user_agent, "kw");
      message.keep_alive(true);
      if (!token_.empty()) message.set(bhttp::field::authorization, "Bearer " + token_);
      for (const auto& [name, value] : headers) message.set(name, value);
      if (!body.empty() || method == "POST" || method == "PUT") {
        if (message[bhttp::field::content_type].empty())
          message.set(bhttp::field::content_type, "application/json");
        message.body() = body;
        message.prepare_payload();
      }
      c.stream.expires_after(timeout_);
      bhttp::write(c.stream, message);
      beast::flat_buffer buffer;
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(1024ull * 1024 * 1024);
      if (method == "HEAD") parser.skip(true);
      bhttp::read(c.stream, buffer, parser);
      auto reply = parser.release();
      Response response;
      response.status = static_cast<int>(reply.result_int());
      response.body = std::move(reply.body());
      for (const auto& field : reply) {
        std::string name(field.name_string());
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        response.headers[name] = std::string(field.value());
      }
      if (!reply.keep_alive()) {
        beast::error_code ec;
        c.stream.socket().shutdown(tcp::socket::shutdown_both, ec);
        c.stream.close();
        c.open = false;
      }
      return response;
    } catch (const boost::system::system_error& error) {
      beast::error_code ec;
      c.stream.socket().close(ec);
      c.open = false;
      if (reused && attempt == 0) continue;
      throw ConnectionError("cannot reach " + base_url_ + " (" + method + " " + target +
                            "): " + error.code().message());
    }
  }
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
