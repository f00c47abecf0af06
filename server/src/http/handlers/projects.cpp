// A project: made, read and configured (its history: history.cpp).
#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"
#include "notify/notifier.hpp"
#include "store/detection_repository.hpp"
#include "store/notification_outbox.hpp"
#include "store/run_repository.hpp"
#include "store/settings_repository.hpp"

namespace kw::server {

using nlohmann::json;

void add_project_routes(Router& router, const HandlerContext& context) {
  const Access admin = Access::of({});

  router.add("POST", "/api/v1/projects", admin, [&context](Request& request) {
    json body = require_object(request);
    std::string name = body_string(body, "name");
    common::check_project_name(name, "name");
    if (request.caller->projects)
      throw Forbidden("project_denied",
                      "token \"" + request.caller->token_name +
                          "\" is scoped to projects; only an unscoped admin makes projects");
    std::string default_branch = body_string(body, "default_branch", false);
    if (default_branch.empty()) default_branch = "main";
    return Response::json(201, with_transaction(context.pool, [&](pqxx::work& tx) {
                            auto id = RunRepository::create_project(tx, name, default_branch);
                            if (!id) throw Conflict("project_exists", "project \"" + name + "\" exists");
                            return SettingsRepository::get(tx, *id).to_json();
                          }));
  });

  router.add("GET", "/api/v1/projects/{project}", Access::read(), [&context](Request& request) {
    return Response::json(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                            std::int64_t id = readable_project(tx, request, request.param("project"));
                            json project = SettingsRepository::get(tx, id).to_json();
                            // How delivery to each of its targets fares (paused after repeated
                            // failures): for its admins, who can act on it.
                            if (request.caller && request.caller->scope == Scope::admin)
                              project["notification_targets"] = NotificationOutbox::targets_json(
                                  tx,
                                  NotificationRepository::targets_of_project(tx, context.notifications, id));
                            return project;
                          }));
  });

  router.add("GET", "/api/v1/projects/{project}/audit", Access::read(), [&context](Request& request) {
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 return RunRepository::audit_json(
                                     tx, readable_project(tx, request, request.param("project")));
                               }));
  });

  router.add("PUT", "/api/v1/projects/{project}/settings", admin, [&context](Request& request) {
    json changes = require_object(request);
    request.caller->require_project(request.param("project"));
    if (auto url = changes.find("webhook_url");
        url != changes.end() && url->is_string() && !context.notifications.allow_private_webhooks) {
      if (std::string problem = private_host_problem(url->get<std::string>()); !problem.empty())
        throw Unprocessable(
            "private_webhook", "webhook_url",
            "must reach a public address: " + problem +
                " (kw-server --allow-private-webhooks allows it, for an on-premises receiver)");
    }
    json settings = with_transaction(context.pool, [&](pqxx::work& tx) {
      std::int64_t id = RunRepository::require_project(tx, request.param("project"));
      return SettingsRepository::update(tx, id, changes).to_json();
    });
    context.reads.committed(request.param("project"));
    return Response::json(200, settings);
  });
}

}  // namespace kw::server
