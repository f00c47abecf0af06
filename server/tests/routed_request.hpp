// A request handed to a Router as the HTTP server hands it: for tests of
// routes without a server, a socket or a database.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "http/router.hpp"

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

}  // namespace kw::server::testing
