#include "http/router.hpp"

#include <pqxx/pqxx>

#include "errors.hpp"
#include "kw/common/run_report.hpp"
#include "log_line.hpp"

namespace kw::server {

namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) segments.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return segments;
}

std::string bearer_token(const std::string& authorization) {
  constexpr std::string_view prefix = "Bearer ";
  if (authorization.size() <= prefix.size() ||
      !std::equal(prefix.begin(), prefix.end(), authorization.begin(),
                  [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
    return {};
  }
  return authorization.substr(prefix.size());
}

}  // namespace

Router::Router(Authenticator authenticator, Metrics& metrics, bool reads_need_token)
    : authenticator_(std::move(authenticator)), metrics_(metrics), reads_need_token_(reads_need_token) {}

void Router::add(std::string method, std::string pattern, Access access, Handler handler) {
  std::vector<std::string> segments = split_path(pattern);
  routes_.push_back(
      {std::move(method), std::move(pattern), std::move(segments), std::move(access), std::move(handler)});
}

const Router::Route* Router::match(Request& request, bool& path_matched) const {
  std::vector<std::string> segments = split_path(request.path);
  path_matched = false;
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size()) continue;
    std::map<std::string, std::string> params;
    bool ok = true;
    for (std::size_t i = 0; i < segments.size() && ok; ++i) {
      const std::string& want = route.segments[i];
      if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
        params[want.substr(1, want.size() - 2)] = segments[i];
      } else {
        ok = want == segments[i];
      }
    }
    if (!ok) continue;
    path_matched = true;
    if (route.method != request.method && !(route.method == "GET" && request.method == "HEAD")) continue;
    request.path_params = std::move(params);
    return &route;
  }
  return nullptr;
}

void Router::authorize(const Route& route, Request& request) const {
  if (route.access.probe) return;
  std::string token = bearer_token(request.authorization);
  if (!token.empty()) {
    request.caller = authenticator_(token);
    if (!request.caller) throw Unauthorized("token_unknown", "the bearer token is unknown or revoked");
  }
  if (route.access.open_read && !reads_need_token_) return;
  if (!request.caller) {
    throw Unauthorized("token_missing", "this endpoint needs `Authorization: Bearer <token>`");
  }
  if (route.access.open_read || request.caller->scope == Scope::admin) return;
  for (Scope scope : route.access.scopes) {
    if (request.caller->scope == scope) return;
  }
  std::string allowed;
  for (Scope scope : route.access.scopes) {
    allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(scope));
  }
  throw Forbidden("scope_denied", "token \"" + request.caller->token_name + "\" has scope " +
                                      std::string(to_string(request.caller->scope)) + "; " + route.method +
                                      " " + route.pattern + " needs " +
                                      (allowed.empty() ? "admin" : allowed + " or admin"));
}

void Router::take_body(const Route& route, Request& request) const {
  if (route.method == "GET" || route.method == "HEAD") {
    request.body.clear();
    request.body.shrink_to_fit();
    return;
  }
  request.json_memory = route.access.run_reports ? kReportJsonMemory : kSmallJsonMemory;
  // Taken when the header came (admit), where the server checks headers.
  if (!request.memory) take_memory(request, request.body.size());
  decode_content(request, decoded_limit_);
}

const Router::Route* Router::route_for(Request& request) const {
  bool path_matched = false;
  const Route* route = match(request, path_matched);
  if (route == nullptr && path_matched)
    throw MethodNotAllowed("method_not_allowed", request.method + " is not allowed on " + request.path);
  return route;
}

void Router::take_memory(Request& request, std::size_t bytes) const {
  request.memory = std::make_shared<common::MemoryLease>(memory_);
  try {
    request.memory->take(bytes);
  } catch (const common::MemoryBusy& error) {
    throw ServiceUnavailable("busy", std::string(error.what()) + "; retry shortly");
  }
}

std::optional<Response> Router::admit(Request& request, std::size_t body_bytes) {
  Response refusal;
  try {
    const Route* route = route_for(request);
    // A read's body is dropped unread: a static file's too.
    if (request.method == "GET" || request.method == "HEAD") return std::nullopt;
    if (route == nullptr) throw NotFound("no_such_endpoint", "no such endpoint: " + request.path);
    authorize(*route, request);
    take_memory(request, body_bytes);
    return std::nullopt;
  } catch (const HttpError& error) {
    refusal = Response::error(error.status(), error.code(), error.what(), error.field());
  } catch (const pqxx::broken_connection& error) {
    refusal = Response::error(503, "database_unavailable",
                              std::string("database connection lost: ") + error.what());
  } catch (const pqxx::sql_error& error) {
    refusal = Response::error(503, "database_unavailable", "database: " + std::string(error.what()));
  }
  metrics_.observe_request("refused on its header", refusal.status, 0);
  return refusal;
}

Response Router::handle(Request& request) {
  auto started = std::chrono::steady_clock::now();
  std::string route_label = "unmatched";
  Response response;
  try {
    const Route* route = route_for(request);
    if (route == nullptr) {
      bool api = request.path.rfind("/api/", 0) == 0;
      if (!api && static_ && (request.method == "GET" || request.method == "HEAD")) {
        route_label = "GET static";
        if (auto file = static_(request)) {
          response = std::move(*file);
          metrics_.observe_request(
              route_label, response.status,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
          return response;
        }
      }
      throw NotFound("no_such_endpoint", "no such endpoint: " + request.path);
    }
    route_label = route->method + " " + route->pattern;
    authorize(*route, request);
    take_body(*route, request);
    response = route->handler(request);
  } catch (const HttpError& error) {
    response = Response::error(error.status(), error.code(), error.what(), error.field());
  } catch (const common::ValidationError& error) {
    response = Response::error(422, error.code(), error.what(), error.path());
  } catch (const pqxx::broken_connection& error) {
    response = Response::error(503, "database_unavailable",
                               std::string("database connection lost: ") + error.what());
  } catch (const pqxx::sql_error& error) {
    // Connection exceptions, operator intervention (a statement timeout, a
    // shutdown) and insufficient resources pass; anything else is a bug.
    const std::string& state = error.sqlstate();
    if (state.rfind("08", 0) == 0 || state.rfind("57", 0) == 0 || state.rfind("53", 0) == 0) {
      response = Response::error(503, "database_unavailable", "database: " + std::string(error.what()));
    } else {
      LogLine() << "kw-server: " << request.method << " " << request.path << ": " << error.what() << "\n";
      response = Response::error(500, "internal", "internal error; see the server log");
    }
  } catch (const std::exception& error) {
    LogLine() << "kw-server: " << request.method << " " << request.path << ": " << error.what() << "\n";
    response = Response::error(500, "internal", "internal error; see the server log");
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  metrics_.observe_request(route_label, response.status, seconds);
  response.authenticated = request.caller.has_value();
  return response;
}

}  // namespace kw::server
