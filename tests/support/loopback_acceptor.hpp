// The listening side of the HTTP test doubles: a TCP acceptor on a loopback
// port whose blocking accept() another thread can end.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <optional>
#include <string>

namespace kw::testing {

class LoopbackAcceptor {
 public:
  LoopbackAcceptor() {
    acceptor_.open(boost::asio::ip::tcp::v4());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // The next connection; nullopt once closed.
  std::optional<boost::asio::ip::tcp::socket> accept() {
    boost::asio::ip::tcp::socket socket(io_);
    boost::system::error_code ec;
    acceptor_.accept(socket, ec);
    if (ec || closed_) return std::nullopt;
    return socket;
  }

  // Ends accept() in the serving thread: closed, then woken by a connection.
  void close() {
    closed_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket poke(io);
    poke.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_{io_};
  unsigned short port_ = 0;
  std::atomic<bool> closed_{false};
};

}  // namespace kw::testing
