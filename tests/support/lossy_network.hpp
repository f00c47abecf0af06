// A TEST DOUBLE for a network that loses requests: a loopback HTTP proxy in
// front of a real server that forwards each request and relays the answer,
// except that while told to lose requests whose "METHOD target" holds some
// text, it closes the connection on them unanswered, as a dropped link does.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kw/http/client.hpp"
#include "loopback_acceptor.hpp"

namespace kw::testing {

class LossyNetwork {
 public:
  explicit LossyNetwork(std::string upstream) : upstream_(std::move(upstream)) {
    runner_ = std::thread([this] { serve(); });
  }
  ~LossyNetwork() {
    listener_.close();
    runner_.join();
  }

  std::string url() const { return listener_.url(); }
  // Loses every request whose "METHOD target" holds `text` ("" loses none).
  void lose(const std::string& text) {
    std::lock_guard lock(mutex_);
    lose_ = text;
  }
  // "METHOD target" of each request, lost ones marked " (lost)".
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    namespace bhttp = boost::beast::http;
    while (auto accepted = listener_.accept()) {
      boost::asio::ip::tcp::socket& socket = *accepted;
      boost::system::error_code ec;
      http::Client upstream(upstream_);
      boost::beast::flat_buffer buffer;
      for (;;) {
        bhttp::request_parser<bhttp::string_body> parser;
        parser.body_limit(std::size_t{1} << 30);
        bhttp::read(socket, buffer, parser, ec);
        if (ec) break;
        const auto& request = parser.get();
        const std::string line = std::string(request.method_string()) + " " + std::string(request.target());
        if (lost(line)) break;
        std::map<std::string, std::string> headers;
        for (const auto& field : request) {
          const std::string name(field.name_string());
          if (name == "Authorization" || name == "Content-Encoding" || name == "Content-Type")
            headers[name] = std::string(field.value());
        }
        bhttp::response<bhttp::string_body> response;
        try {
          http::Response answer = upstream.request(std::string(request.method_string()),
                                                   std::string(request.target()), request.body(), headers);
          response.result(static_cast<unsigned>(answer.status));
          response.set(bhttp::field::content_type, "application/json");
          response.body() = std::move(answer.body);
        } catch (const http::ConnectionError&) {
          break;
        }
        response.keep_alive(request.keep_alive());
        response.prepare_payload();
        bhttp::write(socket, response, ec);
        if (ec || !request.keep_alive()) break;
      }
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    }
  }

  bool lost(const std::string& line) {
    std::lock_guard lock(mutex_);
    const bool lose = !lose_.empty() && line.find(lose_) != std::string::npos;
    requests_.push_back(line + (lose ? " (lost)" : ""));
    return lose;
  }

  std::string upstream_;
  LoopbackAcceptor listener_;
  std::thread runner_;
  std::mutex mutex_;
  std::string lose_;
  std::vector<std::string> requests_;
};

}  // namespace kw::testing
