// Boost.Beast HTTP/1.1 server: a listener accepting connections and one
// session per connection. Sessions never run application code: the request
// handler, which sees only Request/Response values, runs on a handler pool
// and its response is written back on the session's strand.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "http/http_types.hpp"

namespace kw::server {

struct HttpOptions {
  std::string address = "127.0.0.1";
  unsigned short port = 8080;  // 0 picks a free port
  int threads = 4;
  std::size_t body_limit = std::size_t{16} * 1024 * 1024;
  // A gzip body (Content-Encoding: gzip) may decompress to at most this: a
  // 10,000-case report of 3 implementations x 60 samples is 28.9 MiB, a
  // pull request's of the same size, with its base, 38 MiB.
  std::size_t decoded_body_limit = std::size_t{64} * 1024 * 1024;
  // What the bodies being inflated and parsed at once may hold in all
  // (an estimate counted as they grow); past it a request gets 503 and
  // Retry-After. A 10,000-case report takes about 200 MiB of it.
  std::size_t body_memory = std::size_t{640} * 1024 * 1024;
  std::chrono::seconds read_timeout{30};  // to receive one whole request
  std::chrono::seconds idle_timeout{60};  // keep-alive wait for the next request
  // Connections served at once; one more is answered 503 with Retry-After
  // and closed, so a flood cannot take every file descriptor.
  std::size_t max_connections = 1024;
  // Connections one client address may hold at once, so one client cannot
  // take every slot; over it, the same 503 as over max_connections.
  std::size_t max_connections_per_address = 64;
  // Connections that have not (yet) sent a valid token; 0: three quarters of
  // max_connections. A client with many addresses cannot hold every slot:
  // past either cap a new connection takes the slot of the connection idle
  // longest (one that never authenticated first, idle at least
  // evict_idle_after), and only when none is idle is it answered 503.
  std::size_t max_unauthenticated_connections = 0;
  std::chrono::milliseconds evict_idle_after{1000};
  // A request's header and body must come at this many bytes a second or
  // more, after the first `slow_request_grace` (nginx's client_header_timeout
  // and client_body_timeout, as a rate): a client that sends a byte every
  // few seconds holds a slot no longer than that. A connection that has not
  // yet sent a valid token, in the middle of a slow request, is also the
  // first to give up its slot to a newcomer when the server is full.
  std::size_t min_request_bytes_per_second = 1024;
  std::chrono::milliseconds slow_request_grace{2000};
  // A new connection must send its first request's header within this, a
  // kept-alive one its next request within idle_timeout: connections opened
  // and left silent are closed early. Both shorten as the server fills past
  // half its connections, down to a second when full.
  std::chrono::seconds first_request_timeout{10};
  // Served on a thread of their own, never queued behind handlers that wait
  // on the database: a liveness probe answers even while it is frozen.
  std::vector<std::string> probe_paths = {"/healthz", "/metrics"};
  // Handlers run on three pools, never on the I/O threads: reads (GET,
  // HEAD), small writes, and writes with a body of ingest_body_bytes or more
  // (run reports, profiles), so neither a read nor a claim queues behind an
  // ingest. Ingest is PostgreSQL's CPU as much as ours: on 2 cores, 8 agents
  // posting took a series read's p99 from 22 ms with one ingest thread to
  // 52 ms with two and 99-109 ms with four (kw-server-bench,
  // docs/PERFORMANCE.md), so ingest gets half the cores. A claim mostly
  // waits on PostgreSQL: 50 agents claimed 454 a second on one thread and
  // 764 on four.
  int read_threads = 4;
  int write_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  int small_write_threads = 4;
  std::size_t ingest_body_bytes = std::size_t{16} * 1024;  // as sent (a gzip report's compressed size)
  // A response still not ready after this long asks the OverdueCheck whether
  // to answer now instead (503 while the database is not answering), then
  // again every 100 ms.
  std::chrono::milliseconds overdue_after{1500};
};

class Session;

class HttpServer {
 public:
  using RequestHandler = std::function<Response(Request&)>;
  // For a request whose handler has run longer than overdue_after: a
  // response to send now (the handler's own, when it comes, is dropped), or
  // nullopt to keep waiting. Called on an I/O thread: it must not block.
  using OverdueCheck = std::function<std::optional<Response>()>;
  // Run on a handler pool once a request's header has come and before any
  // byte of its body is read, for requests with a body: a response to send
  // instead (the body unread, the connection closed after it), or nullopt to
  // read the body. `body_bytes` is its Content-Length (the body limit for a
  // chunked one); it may take them from a memory budget into `head.memory`.
  using HeaderCheck = std::function<std::optional<Response>(Request& head, std::size_t body_bytes)>;

  HttpServer(HttpOptions options, RequestHandler handler, OverdueCheck overdue = {}, HeaderCheck admit = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (throws with the address on failure), then runs the
  // worker threads.
  void start();
  unsigned short port() const { return bound_port_; }
  bool is_loopback() const;

  // Stops accepting, closes idle keep-alive connections, lets requests in
  // flight finish (up to `grace`), then stops the threads. Safe to call from
  // any thread, more than once.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // Blocks until the worker threads have ended.
  void wait();

  boost::asio::io_context& io_context() { return io_; }

 private:
  friend class Session;
  void do_accept();
  void on_accept_error(const boost::system::error_code& ec);
  void refuse(boost::asio::ip::tcp::socket socket);
  // False (nothing registered) when the address is at its cap, or the
  // server is and no idle connection can give up its slot.
  bool register_session(Session* session, const std::shared_ptr<Session>& shared, const std::string& address);
  void unregister_session(Session* session, const std::string& address);
  // The session's request carried a valid token: it no longer counts against
  // max_unauthenticated_connections.
  void mark_authenticated(Session* session);
  // The connection idle longest that may give up its slot (never
  // authenticated first); nullptr when none has been idle long enough.
  std::shared_ptr<Session> eviction_candidate(bool unauthenticated_only);
  // How long a connection may wait for its (first) request now.
  std::chrono::milliseconds wait_for_request(bool first);
  std::chrono::milliseconds wait_at_fill(bool first) const;  // under sessions_mutex_
  // Closes idle connections that have waited longer than the server, as
  // full as it is now, allows; again every second.
  void sweep_idle();

  HttpOptions options_;
  RequestHandler handler_;
  OverdueCheck overdue_;
  HeaderCheck admit_;
  boost::asio::thread_pool read_pool_, write_pool_, small_write_pool_, probe_pool_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short bound_port_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::mutex sessions_mutex_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;
  std::unordered_map<std::string, std::size_t> sessions_per_address_;
  std::size_t unauthenticated_ = 0;  // sessions that have not sent a valid token
  std::unique_ptr<boost::asio::steady_timer> grace_timer_;
  // Accept errors (EMFILE, ENFILE, ENOBUFS) are retried after a growing
  // pause, and logged at most once a second with how many were not.
  std::unique_ptr<boost::asio::steady_timer> accept_timer_;
  std::unique_ptr<boost::asio::steady_timer> sweep_timer_;
  std::chrono::milliseconds accept_backoff_{0};
  std::chrono::steady_clock::time_point last_accept_log_{};
  std::size_t unlogged_accept_errors_ = 0;
};

}  // namespace kw::server
