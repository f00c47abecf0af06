#include "errors.hpp"
#include "http/handlers/handlers.hpp"

namespace kw::server {

void add_health_routes(Router& router, const HealthContext& context) {
  // From the monitor's last ping: never waits on the database.
  router.add("GET", "/healthz", Access::open_probe(), [&context](Request&) {
    if (auto problem = context.database_problem()) throw ServiceUnavailable("database_unavailable", *problem);
    return Response::json(200, {{"status", "ok"},
                                {"schema_version", context.schema_version},
                                {"database_ping_ms", context.database_ping_ms()}});
  });

  router.add("GET", "/metrics", Access::open_probe(), [&context](Request&) {
    Response response;
    response.content_type = "text/plain; version=0.0.4";
    response.body = context.metrics.render();
    return response;
  });
}

}  // namespace kw::server
