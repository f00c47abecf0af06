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

namespace kw::server {

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // raw target, with query
  std::string path;    // decoded path without query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> path_params;
  std::string body;
  std::string authorization;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::optional<Caller> caller;                // set by the router once authenticated

  const std::string& param(const std::string& name) const;
  std::optional<std::string> query_value(const std::string& name) const;
  // 404 "no_such_<resource>" when not a positive integer.
  std::int64_t id_param(const std::string& name, const std::string& resource) const;
  nlohmann::json json_body() const;  // 400 when not JSON
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

  static Response json(int status, const nlohmann::json& value);
  static Response json_text(int status, std::string text);
  static Response error(int status, const std::string& code, const std::string& message,
                        const std::string& field = {});
};

// Replaces a gzip body (Content-Encoding: gzip) by what it decompresses to,
// within `decoded_limit` bytes. nullopt when the body is now plain; else the
// answer: 413 past the limit, 400 on corrupt gzip, 415 on another encoding.
std::optional<Response> decode_content(Request& request, std::size_t decoded_limit);

// nullopt: a '%' not followed by two hex digits, %00, or bytes that are not
// UTF-8 (nothing the store could hold or a name could match).
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
// Throws BadRequest on what percent_decode refuses.
std::map<std::string, std::string> parse_query(std::string_view query);

}  // namespace kw::server
