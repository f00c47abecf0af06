// Maps (method, path pattern) to a handler, checks the caller's scope, and is
// the single place where exceptions become JSON error responses.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "http/http_types.hpp"
#include "http/metrics.hpp"

namespace kw::server {

using Handler = std::function<Response(Request&)>;
// Token -> caller, or nullopt when the token is unknown or revoked.
using Authenticator = std::function<std::optional<Caller>(const std::string& token)>;

// Who may call a route. `open_read` routes are open to anyone when the
// server's reads are open (loopback default) and need any valid token
// otherwise; the others need one of `scopes` (admin always passes).
struct Access {
  bool open_read = false;
  std::vector<Scope> scopes;
  // Probes (/healthz, /metrics): open to anyone, whatever the server's reads
  // need and whatever token comes with them.
  bool probe = false;
  // Takes run reports, whose JSON may hold more memory per byte than other
  // bodies (kReportJsonMemory).
  bool run_reports = false;

  static Access read() { return {true, {}}; }
  static Access of(std::vector<Scope> scopes) { return {false, std::move(scopes)}; }
  static Access open_probe() { return {true, {}, true}; }
  static Access agent_reports() { return {false, {Scope::agent}, false, true}; }
};

class Router {
 public:
  Router(Authenticator authenticator, Metrics& metrics, bool reads_need_token);

  void add(std::string method, std::string pattern, Access access, Handler handler);
  // Answers GET requests no route matched (the dashboard's static files);
  // nullopt means 404. Reads of static files are open like the other reads.
  void set_static(std::function<std::optional<Response>(const Request&)> handler) {
    static_ = std::move(handler);
  }
  // A body is inflated (and its memory taken from `budget`) only once its
  // route is known to take one and its caller may call that route: no byte
  // of an unauthenticated body is inflated or parsed. Bodies sent to routes
  // that take none are dropped unread.
  void set_body_decoding(std::size_t decoded_limit, common::MemoryBudget* budget) {
    decoded_limit_ = decoded_limit;
    memory_ = budget;
  }
  Response handle(Request& request);
  // Each route's method and pattern, as added ("GET", "/api/v1/runs/{id}").
  std::vector<std::pair<std::string, std::string>> routes() const {
    std::vector<std::pair<std::string, std::string>> all;
    for (const Route& route : routes_) all.emplace_back(route.method, route.pattern);
    return all;
  }
  // On the header of a request with a body, before the body is read
  // (HttpServer::HeaderCheck): the route, the caller's token and scope, and
  // `body_bytes` of body memory. A refusal to send instead, or nullopt.
  std::optional<Response> admit(Request& head, std::size_t body_bytes);

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    Access access;
    Handler handler;
  };

  const Route* match(Request& request, bool& path_matched) const;
  // The request's route; nullptr where none has its path; 405 where only
  // routes of other methods have it.
  const Route* route_for(Request& request) const;
  void authorize(const Route& route, Request& request) const;
  void take_body(const Route& route, Request& request) const;
  // `bytes` of the body memory for the request (503 "busy" when it has not them).
  void take_memory(Request& request, std::size_t bytes) const;

  std::vector<Route> routes_;
  std::function<std::optional<Response>(const Request&)> static_;
  Authenticator authenticator_;
  Metrics& metrics_;
  bool reads_need_token_;
  std::size_t decoded_limit_ = std::size_t{64} << 20;
  common::MemoryBudget* memory_ = nullptr;
};

}  // namespace kw::server
