#include "http/http_server.hpp"

#include <algorithm>
#include <array>
#include <optional>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http/session.hpp"
#include "log_line.hpp"

namespace kw::server {

HttpServer::HttpServer(HttpOptions options, RequestHandler handler, OverdueCheck overdue, HeaderCheck admit)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      overdue_(std::move(overdue)),
      admit_(std::move(admit)),
      read_pool_(static_cast<std::size_t>(std::max(1, options_.read_threads))),
      write_pool_(static_cast<std::size_t>(std::max(1, options_.write_threads))),
      small_write_pool_(static_cast<std::size_t>(std::max(1, options_.small_write_threads))),
      probe_pool_(1),
      acceptor_(net::make_strand(io_)) {}

HttpServer::~HttpServer() {
  stop(std::chrono::milliseconds(0));
  wait();
}

void HttpServer::start() {
  beast::error_code ec;
  auto address = net::ip::make_address(options_.address, ec);
  if (ec) throw std::runtime_error("--listen: \"" + options_.address + "\" is not an IP address");
  tcp::endpoint endpoint(address, options_.port);
  auto check = [&](const char* what) {
    if (ec) {
      throw std::runtime_error(std::string("cannot ") + what + " " + options_.address + ":" +
                               std::to_string(options_.port) + ": " + ec.message());
    }
  };
  acceptor_.open(endpoint.protocol(), ec);
  check("open");
  acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  check("configure");
  acceptor_.bind(endpoint, ec);
  check("bind");
  acceptor_.listen(net::socket_base::max_listen_connections, ec);
  check("listen on");
  bound_port_ = acceptor_.local_endpoint().port();
  do_accept();
  sweep_timer_ = std::make_unique<net::steady_timer>(acceptor_.get_executor());
  net::post(acceptor_.get_executor(), [this] { sweep_idle(); });
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& error) {
          LogLine() << "kw-server: worker: " << error.what() << "\n";
        }
      }
    });
  }
}

bool HttpServer::is_loopback() const {
  beast::error_code ec;
  auto address = net::ip::make_address(options_.address, ec);
  return !ec && address.is_loopback();
}

void HttpServer::do_accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
      return on_accept_error(ec);
    }
    accept_backoff_ = std::chrono::milliseconds(0);
    if (!stopping_) {
      beast::error_code endpoint_ec;
      const auto peer = socket.remote_endpoint(endpoint_ec);
      std::string address = endpoint_ec ? std::string() : peer.address().to_string();
      // Responses go out as header + body writes; without this, Nagle and the
      // peer's delayed ACK add up to 40 ms to a large response.
      beast::error_code option_ec;
      socket.set_option(tcp::no_delay(true), option_ec);
      auto session = std::make_shared<Session>(std::move(socket), *this, address);
      if (register_session(session.get(), session, address)) {
        session->mark_registered();
        session->run();
      } else {
        refuse(session->release_socket());
      }
    }
    if (!stopping_) do_accept();
  });
}

// Out of descriptors, accept fails at once for as long as the pending
// connection waits: retried at once, that spun a core and wrote megabytes of
// log a second. The pause doubles up to a second; connections that
// end meanwhile free descriptors, and serving goes on.
void HttpServer::on_accept_error(const boost::system::error_code& ec) {
  accept_backoff_ =
      std::clamp(accept_backoff_ * 2, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  const auto now = std::chrono::steady_clock::now();
  if (now - last_accept_log_ >= std::chrono::seconds(1)) {
    LogLine() << "kw-server: accept: " << ec.message()
              << (unlogged_accept_errors_ > 0 ? " (" + std::to_string(unlogged_accept_errors_) +
                                                    " more since the last of these lines)"
                                              : std::string())
              << "; retrying in " << accept_backoff_.count() << " ms" << std::endl;
    last_accept_log_ = now;
    unlogged_accept_errors_ = 0;
  } else {
    ++unlogged_accept_errors_;
  }
  if (!accept_timer_) accept_timer_ = std::make_unique<net::steady_timer>(acceptor_.get_executor());
  accept_timer_->expires_after(accept_backoff_);
  accept_timer_->async_wait([this](beast::error_code timer_ec) {
    if (!timer_ec && !stopping_) do_accept();
  });
}

namespace {

// A connection over the cap: a 503 the client can act on, a half-close, then
// what the client sent is read until it closes (closing with its request
// unread would reset the connection and lose the 503), two seconds at most.
class Refusal : public std::enable_shared_from_this<Refusal> {
 public:
  explicit Refusal(tcp::socket&& socket) : stream_(std::move(socket)) {}

  void run() {
    static const std::string answer = [] {
      Response response = Response::error(503, "overloaded",
                                          "kw-server is serving its maximum number of connections (in all, "
                                          "or from this address); retry shortly");
      return "HTTP/1.1 503 Service Unavailable\r\nServer: kw-server\r\nContent-Type: " +
             response.content_type + "\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
             std::to_string(response.body.size()) + "\r\n\r\n" + response.body;
    }();
    stream_.expires_after(std::chrono::seconds(2));
    net::async_write(stream_, net::buffer(answer),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return;
                       beast::error_code shutdown_ec;
                       self->stream_.socket().shutdown(tcp::socket::shutdown_send, shutdown_ec);
                       self->drain();
                     });
  }

 private:
  void drain() {
    stream_.async_read_some(net::buffer(buffer_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (!ec) self->drain();
                            });
  }

  beast::tcp_stream stream_;
  std::array<char, 1024> buffer_{};
};

}  // namespace

void HttpServer::refuse(tcp::socket socket) {
  std::make_shared<Refusal>(std::move(socket))->run();
}

std::shared_ptr<Session> HttpServer::eviction_candidate(bool unauthenticated_only) {
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  const auto settled =
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.evict_idle_after).count();
  const std::weak_ptr<Session>* best = nullptr;
  std::int64_t best_since = 0;
  bool best_authenticated = true;
  for (auto& [raw, weak] : sessions_) {
    const bool authenticated = raw->authenticated_;
    // Idle since, or (never authenticated) in the middle of a request since.
    std::int64_t since = raw->idle_since_;
    if (since == 0 && !authenticated) since = raw->request_since_;
    if (since == 0 || now - since < settled || !raw->evictable_ || (unauthenticated_only && authenticated))
      continue;
    // Never-authenticated ones first, then the one idle longest.
    if (best != nullptr &&
        (authenticated > best_authenticated || (authenticated == best_authenticated && since >= best_since)))
      continue;
    best = &weak;
    best_since = since;
    best_authenticated = authenticated;
  }
  return best != nullptr ? best->lock() : nullptr;
}

bool HttpServer::register_session(Session* session, const std::shared_ptr<Session>& shared,
                                  const std::string& address) {
  // Released after the lock: it may hold the last reference to its session,
  // whose destructor takes the lock.
  std::shared_ptr<Session> victim;
  std::lock_guard lock(sessions_mutex_);
  std::size_t& from_address = sessions_per_address_[address];
  const std::size_t unauthenticated_cap = options_.max_unauthenticated_connections > 0
                                              ? options_.max_unauthenticated_connections
                                              : std::max<std::size_t>(1, options_.max_connections * 3 / 4);
  const bool full = sessions_.size() >= options_.max_connections;
  const bool anonymous_full = unauthenticated_ >= unauthenticated_cap;
  // While evicted connections close, a few may be admitted past the cap.
  constexpr std::size_t kEvictionSlack = 16;
  bool admit = from_address < options_.max_connections_per_address &&
               sessions_.size() < options_.max_connections + kEvictionSlack;
  if (admit && (full || anonymous_full)) {
    victim = eviction_candidate(!full);
    admit = victim != nullptr;
    if (victim) {
      victim->evictable_ = false;  // asked once
      victim->evict();
    }
  }
  if (!admit) {
    if (from_address == 0) sessions_per_address_.erase(address);
    return false;
  }
  ++from_address;
  ++unauthenticated_;
  sessions_[session] = shared;
  return true;
}

void HttpServer::mark_authenticated(Session* session) {
  std::lock_guard lock(sessions_mutex_);
  if (session->authenticated_.exchange(true) || sessions_.count(session) == 0) return;
  --unauthenticated_;
}

std::chrono::milliseconds HttpServer::wait_for_request(bool first) {
  std::lock_guard lock(sessions_mutex_);
  return wait_at_fill(first);
}

std::chrono::milliseconds HttpServer::wait_at_fill(bool first) const {
  const std::chrono::milliseconds wait = first ? options_.first_request_timeout : options_.idle_timeout;
  const double fill = static_cast<double>(sessions_.size()) /
                      static_cast<double>(std::max<std::size_t>(1, options_.max_connections));
  if (fill <= 0.5) return wait;
  const auto shortened = std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(wait.count()) * std::max(0.0, (1.0 - fill) * 2)));
  return std::min(wait, std::max(shortened, std::chrono::milliseconds(1000)));
}

// Connections that began waiting while the server was emptier are held to
// the shorter wait too, once a second.
void HttpServer::sweep_idle() {
  std::vector<std::shared_ptr<Session>> overdue;
  {
    std::lock_guard lock(sessions_mutex_);
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    const std::int64_t first_limit =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait_at_fill(true)).count();
    const std::int64_t idle_limit =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(wait_at_fill(false)).count();
    for (auto& [raw, weak] : sessions_) {
      const std::int64_t since = raw->idle_since_;
      if (since != 0 && now.count() - since > (raw->fresh_ ? first_limit : idle_limit)) {
        if (auto session = weak.lock()) overdue.push_back(std::move(session));
      }
    }
  }
  for (auto& session : overdue) session->close_if_idle();
  overdue.clear();  // outside the lock: a session's destructor takes it
  if (stopping_) return;
  sweep_timer_->expires_after(std::chrono::seconds(1));
  sweep_timer_->async_wait([this](beast::error_code ec) {
    if (!ec && !stopping_) sweep_idle();
  });
}

void HttpServer::unregister_session(Session* session, const std::string& address) {
  std::lock_guard lock(sessions_mutex_);
  if (sessions_.erase(session) > 0 && !session->authenticated_) --unauthenticated_;
  if (auto it = sessions_per_address_.find(address); it != sessions_per_address_.end() && --it->second == 0)
    sessions_per_address_.erase(it);
  // The last connection gone during shutdown: nothing to wait for any more.
  if (stopping_ && sessions_.empty() && grace_timer_) grace_timer_->cancel();
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  if (stopping_.exchange(true)) {
    if (grace.count() == 0) io_.stop();
    return;
  }
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
    if (accept_timer_) accept_timer_->cancel();
    if (sweep_timer_) sweep_timer_->cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mutex_);
    for (auto& [_, weak] : sessions_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  for (auto& session : live) session->close_if_idle();
  live.clear();
  // Requests still running after the grace period are cut off.
  std::lock_guard lock(sessions_mutex_);
  grace_timer_ = std::make_unique<net::steady_timer>(io_, grace);
  grace_timer_->async_wait([this](beast::error_code ec) {
    if (!ec) io_.stop();
  });
  if (sessions_.empty()) grace_timer_->cancel();
  if (threads_.empty()) io_.stop();
}

void HttpServer::wait() {
  for (std::thread& thread : threads_) {
    if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) thread.join();
  }
  threads_.clear();
  // Handlers still queued have no connection to answer any more.
  for (auto* pool : {&read_pool_, &write_pool_, &small_write_pool_, &probe_pool_}) pool->stop();
  for (auto* pool : {&read_pool_, &write_pool_, &small_write_pool_, &probe_pool_}) pool->join();
}

}  // namespace kw::server
