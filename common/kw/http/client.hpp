// A small synchronous HTTP/1.1 client on Boost.Beast with keep-alive, used by
// `kw` (agent, CI client: kw-server behind a TLS proxy, GitHub's and GitLab's
// APIs) and the tests. https:// verifies the peer against the system's CA
// certificates (SSL_CERT_FILE / SSL_CERT_DIR override them) and its name.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace kw::http {

struct Response {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names

  nlohmann::json json() const;  // throws std::runtime_error naming the status when not JSON
};

// The server could not be reached or the connection broke (never an HTTP status).
class ConnectionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Client {
 public:
  // base_url: "http[s]://host[:port]" (a trailing path is kept as a prefix).
  explicit Client(const std::string& base_url, std::string token = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  Response request(const std::string& method, const std::string& target, const std::string& body = {},
                   const std::map<std::string, std::string>& headers = {});
  Response get(const std::string& target) { return request("GET", target); }
  Response post(const std::string& target, const nlohmann::json& body) {
    return request("POST", target, body.dump());
  }
  // Sent with Content-Encoding: gzip (a run report: 10,000 cases of 3
  // implementations x 60 samples are 28.9 MiB of JSON, 10.1 MiB compressed).
  Response post_gzip(const std::string& target, const nlohmann::json& body);

  const std::string& base_url() const { return base_url_; }
  void set_token(std::string token) { token_ = std::move(token); }

 private:
  struct Connection;
  void connect();

  std::string base_url_;
  bool tls_ = false;
  std::string host_;
  std::string port_;
  std::string prefix_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Connection> connection_;
};

std::string url_encode(const std::string& text);

}  // namespace kw::http
