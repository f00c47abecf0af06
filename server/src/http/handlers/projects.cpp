#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/run_report.hpp"
#include "notify/notifier.hpp"
#include "store/detection_repository.hpp"
#include "store/notification_outbox.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// Each part length-prefixed: query values may hold any byte.
std::string cache_key(std::initializer_list<std::string> parts) {
  std::string key;
  for (const std::string& part : parts) ((key += std::to_string(part.size())) += ':') += part;
  return key;
}

// The answer from the read cache, or read() kept there; access was checked
// before, so the cache holds data only, never a decision about a caller.
template <typename Read>
Response cached(ReadCache& cache, const std::string& project, const std::string& key, Read&& read) {
  if (auto answer = cache.get(project, key)) return Response::json_text(200, std::move(*answer));
  const ReadCache::Ticket ticket = cache.ticket(project);
  std::string answer = read();
  cache.put(ticket, project, key, answer);
  return Response::json_text(200, std::move(answer));
}

}  // namespace

void add_project_routes(Router& router, const HandlerContext& context) {
  const Access admin = Access::of({});

  // The projects the caller's token names (all of them for an unscoped token
  // or an open read).
  router.add("GET", "/api/v1/projects", Access::read(), [&context](Request& request) {
    std::optional<std::vector<std::string>> only;
    if (request.caller) only = request.caller->projects;
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 return RunRepository::projects_json(tx, only);
                               }));
  });

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
                            // How delivery to each of its targets fares (paused after repeated failures).
                            project["notification_targets"] = NotificationOutbox::targets_json(
                                tx,
                                NotificationRepository::targets_of_project(tx, context.notifications, id));
                            return project;
                          }));
  });

  router.add("PUT", "/api/v1/projects/{project}/settings", admin, [&context](Request& request) {
    json changes = require_object(request);
    request.caller->require_project(request.param("project"));
    json settings = with_transaction(context.pool, [&](pqxx::work& tx) {
      std::int64_t id = RunRepository::require_project(tx, request.param("project"));
      return SettingsRepository::update(tx, id, changes).to_json();
    });
    context.read_cache.changed(request.param("project"));
    return Response::json(200, std::move(settings));
  });

  // One page of cases (default 500): the newest run of each case and GPU model.
  router.add("GET", "/api/v1/projects/{project}/overview", Access::read(), [&context](Request& request) {
    std::string gpu = request.query_value("gpu").value_or("");
    std::string branch = request.query_value("branch").value_or("");
    Page page = page_params(request, 500);
    const std::string& project = request.param("project");
    check_project(request, project);
    return cached(
        context.read_cache, project,
        cache_key({"overview", gpu, branch, std::to_string(page.number), std::to_string(page.per_page)}),
        [&] {
          return with_transaction(context.pool, [&](pqxx::work& tx) {
            std::int64_t project_id = readable_project(tx, request, project);
            if (branch.empty()) branch = SettingsRepository::get(tx, project_id).default_branch;
            return RunRepository::overview_json(tx, project_id, branch, gpu, page);
          });
        });
  });

  router.add("GET", "/api/v1/projects/{project}/cases", Access::read(), [&context](Request& request) {
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 return RunRepository::cases_json(
                                     tx, readable_project(tx, request, request.param("project")));
                               }));
  });

  for (bool regressions : {false, true}) {
    const char* route =
        regressions ? "/api/v1/projects/{project}/regressions" : "/api/v1/projects/{project}/runs";
    router.add("GET", route, Access::read(), [&context, regressions](Request& request) {
      int limit = int_param(request, "limit", 100, 1000);
      std::string branch = request.query_value("branch").value_or("");
      return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                   return RunRepository::runs_json(
                                       tx, readable_project(tx, request, request.param("project")), branch,
                                       limit, regressions);
                                 }));
    });
  }

  router.add("GET", "/api/v1/projects/{project}/branches", Access::read(), [&context](Request& request) {
    return Response::json_text(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                                 return RunRepository::branches_json(
                                     tx, readable_project(tx, request, request.param("project")));
                               }));
  });

  router.add("GET", "/api/v1/projects/{project}/series", Access::read(), [&context](Request& request) {
    auto case_name = request.query_value("case");
    if (!case_name || case_name->empty()) throw BadRequest("bad_query", "case: query parameter is required");
    int limit = int_param(request, "limit", 1000, 10000);
    std::string gpu = request.query_value("gpu").value_or("");
    std::string branch = request.query_value("branch").value_or("");
    const std::string& project = request.param("project");
    check_project(request, project);
    return cached(context.read_cache, project,
                  cache_key({"series", *case_name, gpu, branch, std::to_string(limit)}), [&] {
                    auto text = with_single_statement(context.pool, [&](pqxx::transaction_base& tx) {
                      return RunRepository::series_json(tx, project, *case_name, gpu, branch, limit);
                    });
                    if (!text) throw NotFound("no_such_project", "no project \"" + project + "\"");
                    return std::move(*text);
                  });
  });
}

}  // namespace kw::server
