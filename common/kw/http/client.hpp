// A small blocking HTTP/1.1 client on Boost.Beast with keep-alive, the one
// kernelwatch has: `kw` (agent, CI client: kw-server behind a TLS proxy,
// GitHub's and GitLab's APIs), kw-server's notifications and the tests.
// https:// verifies the peer against the system's CA certificates
// (SSL_CERT_FILE / SSL_CERT_DIR override them) and its name. Every step of a
// request (resolve, connect, TLS handshake, send, read the answer) runs
// asynchronously under a deadline: a peer that accepts and never answers
// costs a timeout, not a stalled agent.
#pragma once

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <functional>
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

// The server could not be reached or the connection broke (never an HTTP
// status). `step` names where: "resolve", "refused" (no address the client
// may connect to), "connect", "TLS handshake", "send" or "read the answer";
// `reason` says why in a few words that name neither the URL nor anything
// the peer sent.
class ConnectionError : public std::runtime_error {
 public:
  ConnectionError(const std::string& what, std::string step = {}, std::string reason = {},
                  bool timed_out = false)
      : std::runtime_error(what), step_(std::move(step)), reason_(std::move(reason)), timed_out_(timed_out) {}
  const std::string& step() const { return step_; }
  const std::string& reason() const { return reason_; }
  bool timed_out() const { return timed_out_; }

 private:
  std::string step_, reason_;
  bool timed_out_ = false;
};

struct ClientOptions {
  // Each step's own limit: a large body may take many of them, a peer that
  // stops answering takes one.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  std::chrono::milliseconds connect_timeout{0};  // resolving and connecting; 0: `timeout`
  std::chrono::milliseconds total{0};            // a whole request, retry included; 0: none
  std::size_t answer_limit = std::size_t{1} << 30;
  // The addresses a request may connect to; unset: any. kw-server's
  // webhooks reach public addresses only: the addresses checked are the ones
  // connected to, so a DNS answer that changes in between gains nothing.
  std::function<bool(const boost::asio::ip::address&)> may_connect;
};

class Client {
 public:
  // base_url: "http[s]://host[:port]" (a trailing path is kept as a prefix).
  explicit Client(const std::string& base_url, std::string token = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  Client(const std::string& base_url, std::string token, ClientOptions options);
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
  void connect(std::chrono::steady_clock::time_point deadline);
  std::chrono::steady_clock::time_point deadline(std::chrono::milliseconds limit,
                                                 std::chrono::steady_clock::time_point started) const;

  std::string base_url_;
  bool tls_ = false;
  std::string host_;
  std::string port_;
  std::string prefix_;
  std::string token_;
  ClientOptions options_;
  std::unique_ptr<Connection> connection_;
};

std::string url_encode(const std::string& text);

}  // namespace kw::http
