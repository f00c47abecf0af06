// The request and response a handler sees: plain values, no sockets.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "kw/common/memory_budget.hpp"

namespace kw::server {

// What a parsed JSON body may hold, times its size plus a slack: a run
// report's value takes 4 times its text where samples dominate and up to
// 7.4 times where keys do (10,000 cases of one sample each: the slack
// covers those up to about 16 MB); the small bodies of other routes need far
// less. A hostile body is stopped here, its decoded text and value under 8
// times its size together.
struct JsonMemory {
  std::size_t per_byte = 4;
  std::size_t slack = std::size_t{1} << 20;
};
inline constexpr JsonMemory kSmallJsonMemory{};
inline constexpr JsonMemory kReportJsonMemory{6, std::size_t{16} << 20};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // raw target, with query
  std::string path;    // decoded path without query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> path_params;
  std::string body;
  // A gzip body as it was sent, once `body` holds what it decompresses to.
  std::string sent_body;
  std::string authorization;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::optional<Caller> caller;                // set by the router once authenticated
  // null: a read where reads are open (no token was needed).
  const Caller* reader() const { return caller ? &*caller : nullptr; }
  // The request's share of the memory that bodies take (inflated and
  // parsed); set by the router for routes that take a body.
  std::shared_ptr<common::MemoryLease> memory;
  JsonMemory json_memory = kSmallJsonMemory;  // the route's (Access::run_reports)

  const std::string& param(const std::string& name) const;
  std::optional<std::string> query_value(const std::string& name) const;
  // 404 "no_such_<resource>" when not a positive integer.
  std::int64_t id_param(const std::string& name, const std::string& resource) const;
  // 400 when not JSON or nested deeper than kMaxJsonDepth, 413 when its
  // value would hold more than `json_memory` allows, 503 when the server's
  // body memory is in use.
  nlohmann::json json_body() const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // A body too large to build at once: `body` is its first part, and this is
  // called on the handler pool for each next part (appended to `chunk`) until
  // it returns false. Sent with chunked transfer encoding as the parts come;
  // a part that throws ends the connection, so a client never takes a cut
  // body for a whole one.
  std::function<bool(std::string& chunk)> stream;
  // A large body many responses share (a download): sent from this one
  // read-only copy with a Content-Length, never copied per connection.
  std::shared_ptr<const std::string> shared_body;
  // The request carried a valid token (set by the router): its connection
  // is one of the authenticated ones the server keeps room for.
  bool authenticated = false;

  static Response json(int status, const nlohmann::json& value);
  static Response json_text(int status, std::string text);
  static Response error(int status, const std::string& code, const std::string& message,
                        const std::string& field = {});
};

// Replaces a gzip body (Content-Encoding: gzip) by what it decompresses to,
// within `decoded_limit` bytes and the request's memory lease; the body as
// sent is kept in `sent_body`. Throws: 413 past the limit, 400 on corrupt
// gzip, 415 on another encoding, 503 when the memory is in use.
void decode_content(Request& request, std::size_t decoded_limit);

// nullopt: a '%' not followed by two hex digits, %00, or bytes that are not
// UTF-8 (nothing the store could hold or a name could match).
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
// Throws BadRequest on what percent_decode refuses.
std::map<std::string, std::string> parse_query(std::string_view query);

}  // namespace kw::server
