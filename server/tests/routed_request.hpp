// A request handed to a Router as the HTTP server hands it: for tests of
// routes without a server, a socket or a database.
#pragma once

#include <cctype>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "http/router.hpp"
#include "kw/http/client.hpp"

namespace kw::server::testing {

struct RoutedAnswer {
  int status = 0;
  nlohmann::json body;  // null when the response has none
};

// `method` `path` (no query) with `body`, and `token` as a bearer token ("": none).
inline RoutedAnswer routed(Router& router, const std::string& method, const std::string& path,
                           const std::string& token, const std::string& body = {}) {
  Request request;
  request.method = method;
  request.target = request.path = path;
  request.body = body;
  if (!token.empty()) request.authorization = "Bearer " + token;
  const Response response = router.handle(request);
  return {response.status, response.body.empty() ? nlohmann::json() : nlohmann::json::parse(response.body)};
}

// A client of a Router as kw::http::Client is of a server, with the same
// calls and answers: a target's query parsed, a streamed body read whole.
class RoutedClient {
 public:
  RoutedClient(Router& router, std::string token) : router_(router), token_(std::move(token)) {}

  // `headers`: their names lower-cased, as the HTTP server gives them.
  http::Response request(const std::string& method, const std::string& target, const std::string& body = {},
                         const std::map<std::string, std::string>& headers = {}) {
    Request request;
    for (const auto& [name, value] : headers) {
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      request.headers[lower] = value;
    }
    request.method = method;
    request.target = target;
    const std::size_t query = target.find('?');
    request.path = percent_decode(target.substr(0, query), false).value_or(target);
    if (query != std::string::npos) request.query = parse_query(target.substr(query + 1));
    request.body = body;
    if (!token_.empty()) request.authorization = "Bearer " + token_;
    Response response = router_.handle(request);
    http::Response answer{response.status, std::move(response.body), {}};
    for (bool more = static_cast<bool>(response.stream); more;) {
      std::string chunk;
      more = response.stream(chunk);
      answer.body += chunk;
    }
    return answer;
  }
  http::Response get(const std::string& target) { return request("GET", target); }
  http::Response post(const std::string& target, const nlohmann::json& body) {
    return request("POST", target, body.dump());
  }

 private:
  Router& router_;
  std::string token_;
};

}  // namespace kw::server::testing
