// One HTTP connection of HttpServer: reads each request's header, has it
// admitted, reads its body within the server's limits and minimum rate,
// hands the request to a handler pool and writes the answer. Only
// http_server.cpp includes it.
#pragma once

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

#include "log_line.hpp"

namespace kw::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer& server, std::string address)
      : stream_(std::move(socket)), server_(server), address_(std::move(address)) {}
  ~Session() {
    if (registered_) server_.unregister_session(this, address_);
  }
  void mark_registered() { registered_ = true; }

  tcp::socket release_socket() { return stream_.release_socket(); }

  void run() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::do_read, shared_from_this()));
  }

  // Called at shutdown, and to free a slot for a new connection: a
  // connection waiting for its next request is closed now; one in the middle
  // of a request finishes it first (and is not asked again).
  void close_if_idle() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->idle_ && (!self->parser_ || !self->parser_->got_some())) return self->close();
      self->evictable_ = false;
    });
  }

  // For a newcomer when the server is full: an idle connection, or one that
  // has sent no valid token and is still sending a request begun a while ago
  // (no handler runs for it), is closed.
  void evict() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      const bool idle = self->idle_ && (!self->parser_ || !self->parser_->got_some());
      const bool slow_anonymous = self->reading_ && !self->authenticated_ && !self->awaiting_;
      if (idle || slow_anonymous) return self->close();
      self->evictable_ = false;
    });
  }

  // Read by the server, under its lock, off this connection's strand.
  std::atomic<bool> authenticated_{false};
  std::atomic<std::int64_t> idle_since_{0};  // steady clock ticks; 0 while a request is served
  std::atomic<bool> fresh_{true};            // no request read yet
  std::atomic<bool> evictable_{true};
  std::atomic<std::int64_t> request_since_{0};  // steady clock ticks the request began; 0: none being read

 private:
  void do_read() {
    parser_.emplace();
    parser_->body_limit(server_.options_.body_limit);
    idle_ = true;
    idle_since_ = std::chrono::steady_clock::now().time_since_epoch().count();
    evictable_ = true;
    stream_.expires_after(server_.wait_for_request(served_ == 0));
    received_ = 0;
    read_header_some();
  }

  // The header a read at a time, so that the bytes that came are counted
  // against the minimum rate from the first of them on.
  void read_header_some() {
    reading_ = true;
    http::async_read_some(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t bytes) {
          self->received_ += bytes;
          if (!ec && self->request_since_ == 0 && self->parser_->got_some()) {
            self->request_since_ = std::chrono::steady_clock::now().time_since_epoch().count();
            self->watch_rate();
          }
          if (ec || self->parser_->is_header_done()) return self->on_header(ec, bytes);
          self->read_header_some();
        });
  }

  // Once a second while a request is read: one arriving slower than the
  // minimum rate, past the grace, is answered 408 and closed.
  void watch_rate() {
    rate_timer_.expires_after(std::chrono::seconds(1));
    rate_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->request_since_ == 0) return;
      if (!self->reading_) return self->watch_rate();  // the server, not the client, has the turn
      const auto& options = self->server_.options_;
      const auto elapsed = std::chrono::steady_clock::now().time_since_epoch() -
                           std::chrono::steady_clock::duration(self->request_since_.load());
      const double seconds = std::chrono::duration<double>(elapsed - options.slow_request_grace).count();
      if (seconds > 0 && static_cast<double>(self->received_) <
                             seconds * static_cast<double>(options.min_request_bytes_per_second)) {
        self->too_slow_ = true;
        beast::error_code cancel_ec;
        self->stream_.socket().cancel(cancel_ec);
        return;
      }
      self->watch_rate();
    });
  }

  void on_header(beast::error_code ec, std::size_t) {
    idle_ = false;
    idle_since_ = 0;
    fresh_ = false;
    if (ec) return on_read_error(ec);
    const bool has_body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (server_.admit_ && has_body)
      return admit(parser_->content_length().value_or(server_.options_.body_limit));
    after_admission();
  }

  // The caller and its memory, decided on the header alone: an unknown token
  // or a body the server has no memory for is answered before any byte of
  // the body is read.
  void admit(std::size_t body_bytes) {
    reading_ = false;
    stream_.expires_never();  // the server has the turn: no client timeout runs meanwhile
    admitted_.emplace();
    fill_head(*admitted_, parser_->get());
    net::post(server_.small_write_pool_, [self = shared_from_this(), body_bytes] {
      std::optional<Response> refusal;
      try {
        refusal = self->server_.admit_(*self->admitted_, body_bytes);
      } catch (...) {
        refusal = Response::error(500, "internal", "internal error; see the server log");
      }
      net::post(self->stream_.get_executor(), [self, refusal = std::move(refusal)]() mutable {
        if (refusal) {
          self->request_since_ = 0;
          self->drain_after_write_ = true;
          return self->write(std::move(*refusal), false, self->parser_->get().version(), false);
        }
        if (self->admitted_->caller && !self->authenticated_) self->server_.mark_authenticated(self.get());
        self->after_admission();
      });
    });
  }

  void after_admission() {
    // The rest of the request gets read_timeout. Not the stream's own
    // expiry: that closes the socket, and a late request is answered 408.
    stream_.expires_never();
    reading_ = true;
    request_timer_.expires_after(server_.options_.read_timeout);
    request_timer_.async_wait([self = shared_from_this()](beast::error_code timer_ec) {
      if (timer_ec) return;
      self->request_timed_out_ = true;
      beast::error_code cancel_ec;
      self->stream_.socket().cancel(cancel_ec);
    });
    auto& header = parser_->get();
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      auto continue_response =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(
          stream_, *continue_response,
          [self = shared_from_this(), continue_response](beast::error_code write_ec, std::size_t) {
            if (write_ec) return self->close();
            self->read_body();
          });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_read({}, 0);
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t bytes) {
                            self->received_ += bytes;
                            if (ec || self->parser_->is_done()) return self->on_read(ec, bytes);
                            self->read_body();
                          });
  }

  // What the header says: method, target, path, query, token and fields.
  // False when the target is not percent-encoded UTF-8.
  template <typename Header>
  static bool fill_head(Request& request, const Header& message) {
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    auto question = request.target.find('?');
    std::optional<std::string> path =
        percent_decode(std::string_view(request.target).substr(0, question), false);
    bool valid_target = path.has_value();
    if (valid_target) {
      request.path = std::move(*path);
      try {
        if (question != std::string::npos)
          request.query = parse_query(std::string_view(request.target).substr(question + 1));
      } catch (const std::exception&) {
        valid_target = false;
      }
    }
    request.authorization = std::string(message[http::field::authorization]);
    for (const auto& field : message) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[name] = std::string(field.value());
    }
    return valid_target;
  }

  void on_read(beast::error_code ec, std::size_t) {
    request_timer_.cancel();
    reading_ = false;
    request_since_ = 0;
    rate_timer_.cancel();
    if (ec) return on_read_error(ec);
    ++served_;
    http::request<http::string_body> message = parser_->release();
    parser_.reset();

    Request request;
    const bool valid_target = fill_head(request, message);
    request.body = std::move(message.body());
    // What admission took for the body stays with it until the request ends.
    if (admitted_) {
      request.memory = std::move(admitted_->memory);
      admitted_.reset();
    }

    const bool keep_alive = message.keep_alive() && !server_.stopping_;
    const bool head = message.method() == http::verb::head;
    if (!valid_target) {
      return write(Response::error(400, "bad_encoding", "the request target is not percent-encoded UTF-8"),
                   keep_alive, message.version(), head);
    }
    dispatch(std::move(request), keep_alive, message.version(), head);
  }

  // The handler runs on a pool; its response comes back to this strand.
  void dispatch(Request request, bool keep_alive, unsigned version, bool head) {
    awaiting_ = true;
    const bool read = request.method == "GET" || request.method == "HEAD";
    const auto& probes = server_.options_.probe_paths;
    const bool probe = read && std::find(probes.begin(), probes.end(), request.path) != probes.end();
    // Decided before the request moves: an encoded body may inflate to a
    // report, so it runs beside the reports, never beside the claims.
    const bool large = request.body.size() >= server_.options_.ingest_body_bytes ||
                       request.headers.count("content-encoding") > 0;
    net::post(probe   ? server_.probe_pool_
              : read  ? server_.read_pool_
              : large ? server_.write_pool_
                      : server_.small_write_pool_,
              [self = shared_from_this(), request = std::move(request), keep_alive, version, head]() mutable {
                Response response;
                try {
                  // The router authenticates, then inflates a body its route takes.
                  response = self->server_.handler_(request);
                } catch (...) {  // the router answers what it can; this is what it cannot
                  response = Response::error(500, "internal", "internal error; see the server log");
                }
                // The body and the memory it holds go back before the answer
                // leaves: a client that sends the next request on reading it
                // finds them free, however late this thread is scheduled.
                { const Request done = std::move(request); }
                net::post(self->stream_.get_executor(),
                          [self, response = std::move(response), keep_alive, version, head]() mutable {
                            if (!self->awaiting_) return;  // answered already, as overdue
                            self->awaiting_ = false;
                            self->overdue_timer_.cancel();
                            self->write(std::move(response), keep_alive, version, head);
                          });
              });
    if (server_.overdue_) check_overdue_after(server_.options_.overdue_after, version, head);
  }

  void check_overdue_after(std::chrono::milliseconds delay, unsigned version, bool head) {
    overdue_timer_.expires_after(delay);
    overdue_timer_.async_wait([self = shared_from_this(), version, head](beast::error_code ec) {
      if (ec || !self->awaiting_) return;
      if (std::optional<Response> now = self->server_.overdue_()) {
        self->awaiting_ = false;
        // Closed after: the handler still holds the request's turn.
        return self->write(std::move(*now), false, version, head);
      }
      self->check_overdue_after(std::chrono::milliseconds(100), version, head);
    });
  }

  void write(Response response, bool keep_alive, unsigned version, bool head) {
    if (response.authenticated && !authenticated_) server_.mark_authenticated(this);
    if (response.stream) return write_streamed(std::move(response), keep_alive, version, head);
    if (response.shared_body) return write_shared(std::move(response), keep_alive, version, head);
    auto message = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), version);
    message->set(http::field::server, "kw-server");
    message->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) message->set(name, value);
    message->keep_alive(keep_alive);
    if (head) {
      message->content_length(response.body.size());
    } else {
      message->body() = std::move(response.body);
      message->prepare_payload();
    }
    stream_.expires_after(server_.options_.read_timeout);
    http::async_write(stream_, *message,
                      [self = shared_from_this(), message](beast::error_code ec, std::size_t) {
                        if (!ec && self->drain_after_write_) return self->drain();
                        if (ec || !message->keep_alive() || self->server_.stopping_) return self->close();
                        self->do_read();
                      });
  }

  // A request refused on its header: the client may still be sending its
  // body, and closing with it unread would reset the connection and lose the
  // answer. What it sends is read and dropped, two seconds at most.
  void drain() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(net::buffer(drained_),
                            [self = shared_from_this()](beast::error_code read_ec, std::size_t) {
                              if (read_ec) return self->close();
                              self->drain_after_write_ = false;
                              self->drain_more();
                            });
  }
  void drain_more() {
    stream_.async_read_some(net::buffer(drained_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain_more();
                            });
  }

  // The header of a response whose body goes out after it, in parts.
  static std::shared_ptr<http::response<http::empty_body>> header_of(const Response& response,
                                                                     bool keep_alive, unsigned version) {
    auto header = std::make_shared<http::response<http::empty_body>>(
        static_cast<http::status>(response.status), version);
    header->set(http::field::server, "kw-server");
    header->set(http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) header->set(name, value);
    header->keep_alive(keep_alive);
    return header;
  }

  // The header, then the shared body a slice at a time straight from its one
  // copy: a connection costs no memory of its own however large the body.
  void write_shared(Response response, bool keep_alive, unsigned version, bool head) {
    auto header = header_of(response, keep_alive, version);
    header->content_length(response.shared_body->size());
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
    stream_.expires_after(server_.options_.read_timeout);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), header, serializer, body = std::move(response.shared_body), keep_alive,
         head](beast::error_code ec, std::size_t) mutable {
          if (ec) return self->close();
          if (head) return self->after_write(keep_alive);
          self->write_slice(std::move(body), 0, keep_alive);
        });
  }

  void write_slice(std::shared_ptr<const std::string> body, std::size_t offset, bool keep_alive) {
    constexpr std::size_t kSlice = std::size_t{256} * 1024;
    if (offset >= body->size()) return after_write(keep_alive);
    const std::size_t size = std::min(kSlice, body->size() - offset);
    stream_.expires_after(server_.options_.read_timeout);
    net::async_write(stream_, net::buffer(body->data() + offset, size),
                     [self = shared_from_this(), body, offset, size, keep_alive](beast::error_code ec,
                                                                                 std::size_t) mutable {
                       if (ec) return self->close();
                       self->write_slice(std::move(body), offset + size, keep_alive);
                     });
  }

  void after_write(bool keep_alive) {
    if (!keep_alive || server_.stopping_) return close();
    do_read();
  }

  // Header, then each part as a chunk as the producer makes it (on the read
  // pool: it reads the database), then the last chunk.
  void write_streamed(Response response, bool keep_alive, unsigned version, bool head) {
    auto header = header_of(response, keep_alive, version);
    header->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
    auto producer = std::make_shared<std::function<bool(std::string&)>>(std::move(response.stream));
    stream_.expires_after(server_.options_.read_timeout);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), header, serializer, producer, first = std::move(response.body),
         keep_alive, head](beast::error_code ec, std::size_t) mutable {
          if (ec) return self->close();
          if (head) return self->write_last_chunk(keep_alive);
          self->write_chunk(std::move(first), producer, true, keep_alive);
        });
  }

  void write_chunk(std::string part, std::shared_ptr<std::function<bool(std::string&)>> producer, bool more,
                   bool keep_alive) {
    if (part.empty()) return more ? produce(std::move(producer), keep_alive) : write_last_chunk(keep_alive);
    auto data = std::make_shared<std::string>(std::move(part));
    stream_.expires_after(server_.options_.read_timeout);
    net::async_write(stream_, http::make_chunk(net::buffer(*data)),
                     [self = shared_from_this(), data, producer, more, keep_alive](beast::error_code ec,
                                                                                   std::size_t) mutable {
                       if (ec) return self->close();
                       if (more) return self->produce(std::move(producer), keep_alive);
                       self->write_last_chunk(keep_alive);
                     });
  }

  void produce(std::shared_ptr<std::function<bool(std::string&)>> producer, bool keep_alive) {
    net::post(server_.read_pool_, [self = shared_from_this(), producer, keep_alive]() mutable {
      std::string part;
      bool more = false;
      bool failed = false;
      try {
        more = (*producer)(part);
      } catch (const std::exception& error) {
        LogLine() << "kw-server: a streamed answer ended early: " << error.what() << "\n";
        failed = true;
      }
      net::post(self->stream_.get_executor(),
                [self, producer, part = std::move(part), more, failed, keep_alive]() mutable {
                  if (failed) return self->close();
                  self->write_chunk(std::move(part), std::move(producer), more, keep_alive);
                });
    });
  }

  void write_last_chunk(bool keep_alive) {
    stream_.expires_after(server_.options_.read_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                       if (ec || !keep_alive || self->server_.stopping_) return self->close();
                       self->do_read();
                     });
  }

  // A request that cannot be read is answered when it is the client's
  // fault (too large, not HTTP), and closed when the connection is gone.
  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return write(Response::error(413, "payload_too_large",
                                   "request body is larger than the limit of " +
                                       std::to_string(server_.options_.body_limit) + " bytes"),
                   false, 11, false);
    }
    // A request begun and not finished in time (a Content-Length longer
    // than the body sent, say): the client learns why it is closed.
    reading_ = false;
    request_since_ = 0;
    rate_timer_.cancel();
    admitted_.reset();
    if (too_slow_) {
      too_slow_ = false;
      return write(Response::error(408, "request_timeout",
                                   "the request came slower than " +
                                       std::to_string(server_.options_.min_request_bytes_per_second) +
                                       " bytes a second"),
                   false, 11, false);
    }
    if (request_timed_out_) {
      request_timed_out_ = false;
      return write(Response::error(408, "request_timeout",
                                   "the request was not complete within " +
                                       std::to_string(server_.options_.read_timeout.count()) + " s"),
                   false, 11, false);
    }
    if (ec == http::error::header_limit) {
      return write(Response::error(431, "request_header_fields_too_large",
                                   "request headers are larger than the limit of 8 KiB"),
                   false, 11, false);
    }
    const bool malformed =
        &ec.category() == &beast::http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message;
    if (malformed)
      return write(Response::error(400, "bad_request", "not an HTTP request: " + ec.message()), false, 11,
                   false);
    close();
  }

  void close() {
    request_timer_.cancel();
    rate_timer_.cancel();
    overdue_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpServer& server_;
  std::string address_;
  bool registered_ = false;
  std::size_t served_ = 0;  // requests read on this connection
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool idle_ = true;
  net::steady_timer request_timer_{stream_.get_executor()};
  bool request_timed_out_ = false;
  bool awaiting_ = false;  // a handler is running for this connection
  net::steady_timer overdue_timer_{stream_.get_executor()};
  net::steady_timer rate_timer_{stream_.get_executor()};
  std::atomic<bool> reading_{false};  // the client has the turn: a request is being read
  std::size_t received_ = 0;          // bytes of the current request read so far
  bool too_slow_ = false;
  std::optional<Request> admitted_;  // the header's request, once admission ran
  bool drain_after_write_ = false;
  std::array<char, 4096> drained_{};
};

}  // namespace kw::server
