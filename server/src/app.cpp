#include "app.hpp"

#include <boost/asio/ip/address.hpp>

#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <sstream>

#include "detection_repository.hpp"
#include "errors.hpp"
#include "job_repository.hpp"
#include "kw/common/json_reader.hpp"
#include "kw/common/run_report.hpp"
#include "migrations.hpp"
#include "run_repository.hpp"
#include "tokens.hpp"

namespace kw::server {

namespace {

using nlohmann::json;

std::vector<Statement> all_statements() {
  std::vector<Statement> statements;
  for (auto part : {TokenRepository::statements(), RunRepository::statements(), JobRepository::statements(),
                    DetectionRepository::statements()}) {
    statements.insert(statements.end(), part.begin(), part.end());
  }
  return statements;
}

// Field readers for small request bodies; errors name the field (422).
// A name by default (at most common::kMaxNameBytes); reasons and other text
// pass a larger bound.
std::string body_string(const json& body, const std::string& field, bool required = true,
                        std::size_t max_bytes = common::kMaxNameBytes) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (required) throw Unprocessable(field + ": is required");
    return {};
  }
  return common::JsonReader::as_string(*it, field, !required, max_bytes);
}

std::optional<std::int64_t> body_integer(const json& body, const std::string& field, std::int64_t min,
                                         std::int64_t max) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) throw Unprocessable(field + ": must be an integer");
  return common::JsonReader::as_integer(*it, field, min, max);
}

// A streamed stage: {"agent", "started": NAME} as a stage starts, or
// {"agent", "stage": {...}} with the stage as its report will hold it.
StageProgress stage_progress(const json& body) {
  constexpr std::size_t kMaxText = 64 * 1024;
  const bool started = body.contains("started"), ended = body.contains("stage");
  if (started == ended) throw Unprocessable("started or stage: exactly one is required");
  StageProgress progress;
  if (started) {
    progress.name = body_string(body, "started");
    if (!common::stage_name_from(progress.name)) {
      throw Unprocessable(
          "started: unknown stage \"" + progress.name +
          "\" (expected build, load, launch_geometry, correctness, quick_bench or full_bench)");
    }
    progress.status = "started";
  } else {
    common::Stage stage = common::parse_stage(body["stage"]);
    progress.name = common::to_string(stage.name);
    progress.status = common::to_string(stage.status);
    progress.duration_ms = stage.duration_ms;
    progress.gpu_seconds = stage.gpu_seconds;
    progress.message = std::move(stage.message);
    progress.log_tail = std::move(stage.log_tail);
    if (progress.message.size() > kMaxText) throw Unprocessable("stage.message: at most 65536 bytes");
    if (progress.log_tail.size() > kMaxText) throw Unprocessable("stage.log_tail: at most 65536 bytes");
  }
  progress.ordinal = static_cast<int>(*common::stage_name_from(progress.name));
  return progress;
}

json require_object(const Request& request) {
  json body = request.json_body();
  if (!body.is_object()) throw Unprocessable("request body must be a JSON object");
  return body;
}

// The dashboard's files: "/" is index.html; no path may leave the directory.
std::optional<Response> static_file(const std::string& root, const Request& request) {
  if (root.empty()) return std::nullopt;
  std::string path = request.path == "/" ? "/index.html" : request.path;
  if (path.find("..") != std::string::npos || path.find('\0') != std::string::npos) return std::nullopt;
  std::ifstream in(root + path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream content;
  content << in.rdbuf();
  static const std::map<std::string, std::string> types = {{".html", "text/html; charset=utf-8"},
                                                           {".js", "text/javascript; charset=utf-8"},
                                                           {".mjs", "text/javascript; charset=utf-8"},
                                                           {".css", "text/css; charset=utf-8"},
                                                           {".png", "image/png"},
                                                           {".svg", "image/svg+xml"},
                                                           {".json", "application/json"}};
  auto dot = path.rfind('.');
  auto type = dot == std::string::npos ? types.end() : types.find(path.substr(dot));
  Response response;
  response.content_type = type == types.end() ? "application/octet-stream" : type->second;
  response.body = content.str();
  response.headers.emplace_back("Cache-Control", path == "/index.html" ? "no-cache" : "max-age=300");
  return response;
}

int limit_param(const Request& request, int fallback, int max) {
  auto text = request.query_value("limit");
  if (!text) return fallback;
  try {
    std::size_t used = 0;
    int value = std::stoi(*text, &used);
    if (used != text->size() || value < 1 || value > max) throw std::out_of_range("limit");
    return value;
  } catch (const std::exception&) {
    throw BadRequest("limit: must be an integer from 1 to " + std::to_string(max));
  }
}

std::int64_t project_id_or_404(pqxx::work& tx, const std::string& name) {
  auto id = RunRepository::find_project(tx, name);
  if (!id) throw NotFound("no project \"" + name + "\"");
  return *id;
}

bool reads_need_token(const ServerOptions& options) {
  if (options.reads_need_token) return true;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(options.http.address, ec);
  bool loopback = !ec && address.is_loopback();
  return !loopback && !options.open_reads;
}

}  // namespace

App::App(ServerOptions options) : options_(std::move(options)) {
  {
    pqxx::connection connection(options_.database_url);
    schema_version_ = apply_migrations(connection);
  }
  monitor_ = std::make_unique<DatabaseMonitor>(options_.database_url);
  // One per read thread, two per write thread (an ingest stores on one while
  // detection reads on the other), one each for the lease reaper and the
  // notifier, and a spare.
  const auto connections = static_cast<std::size_t>(std::max(1, options_.http.read_threads)) +
                           2 * static_cast<std::size_t>(std::max(1, options_.http.write_threads)) + 3;
  pool_ =
      std::make_unique<ConnectionPool>(options_.database_url, connections, all_statements(), monitor_.get(),
                                       std::chrono::seconds(2), options_.statement_timeout);
  router_ = std::make_unique<Router>(
      [this](const std::string& token) {
        return with_transaction(*pool_,
                                [&](pqxx::work& tx) { return TokenRepository::authenticate(tx, token); });
      },
      metrics_, reads_need_token(options_));
  metrics_.add_source([this](std::string& text) {
    text +=
        "# HELP kw_db_pool_connections Database connections by state.\n# TYPE kw_db_pool_connections gauge\n";
    std::size_t in_use = pool_->in_use();
    text += "kw_db_pool_connections{state=\"in_use\"} " + std::to_string(in_use) + "\n";
    text += "kw_db_pool_connections{state=\"idle\"} " + std::to_string(pool_->size() - in_use) + "\n";
    text +=
        "# HELP kw_db_pool_waits_total Times a request waited for a free connection.\n"
        "# TYPE kw_db_pool_waits_total counter\nkw_db_pool_waits_total " +
        std::to_string(pool_->waits()) + "\n";
  });
  metrics_.add_source([this](std::string& text) {
    text += "# HELP kw_db_up Whether the database answered its last ping.\n# TYPE kw_db_up gauge\nkw_db_up " +
            std::string(monitor_->available() ? "1" : "0") + "\n";
    // The job counts need the database; the rest of /metrics does not.
    if (!monitor_->available()) return;
    try {
      text +=
          with_transaction(*pool_, [](pqxx::work& tx) { return JobRepository::counts_by_state_metrics(tx); });
    } catch (const std::exception& error) {
      std::cerr << "kw-server: /metrics: job counts: " << error.what() << "\n";
    }
  });
  register_routes();
  http_ = std::make_unique<HttpServer>(
      options_.http, [this](Request& request) { return router_->handle(request); },
      [this]() -> std::optional<Response> {
        if (monitor_->available()) return std::nullopt;
        return Response::error(503, "unavailable", monitor_->problem());
      });
  notifier_ = std::make_unique<Notifier>(*pool_, options_.notifications);
}

App::~App() {
  stop();
  wait();
}

void App::start() {
  http_->start();
  if (options_.notifications.public_url.empty()) {
    options_.notifications.public_url =
        "http://" + options_.http.address + ":" + std::to_string(http_->port());
  }
  notifier_->start();
  reaper_ = std::thread([this] { reap_leases(); });
}

void App::stop() {
  http_->stop();
  {
    std::lock_guard lock(reaper_mutex_);
    reaper_stop_ = true;
  }
  reaper_wake_.notify_all();
}

void App::wait() {
  http_->wait();
  notifier_->stop();
  if (reaper_.joinable()) reaper_.join();
}

void App::reap_leases() {
  auto period =
      std::chrono::milliseconds(static_cast<int>(std::max(0.05, options_.lease_seconds / 4) * 1000));
  std::unique_lock lock(reaper_mutex_);
  while (!reaper_wake_.wait_for(lock, period, [this] { return reaper_stop_; })) {
    lock.unlock();
    try {
      int requeued =
          with_transaction(*pool_, [](pqxx::work& tx) { return JobRepository::requeue_expired(tx); });
      if (requeued > 0) std::cerr << "kw-server: " << requeued << " expired lease(s) returned to the queue\n";
    } catch (const ServiceUnavailable&) {  // the database monitor logs that once
    } catch (const std::exception& error) {
      std::cerr << "kw-server: lease reaper: " << error.what() << "\n";
    }
    lock.lock();
  }
}

std::int64_t App::agent_for(pqxx::work& tx, const Request& request, const std::string& agent_name) {
  bool admin = request.caller->scope == Scope::admin;
  auto agent = JobRepository::find_agent(tx, agent_name, request.caller->token_id, admin);
  if (!agent) {
    throw Conflict("agent \"" + agent_name + "\" is not registered under this token; claim a job first");
  }
  return *agent;
}

Response App::ingest(Request& request, std::optional<std::int64_t> job_id) {
  json document = request.json_body();
  common::RunReport report = common::parse_run_report(document);
  if (job_id) {
    if (report.job_id && *report.job_id != *job_id) {
      throw Unprocessable("job_id: is " + std::to_string(*report.job_id) + " but the URL names job " +
                          std::to_string(*job_id));
    }
    report.job_id = job_id;
  } else if (report.job_id) {
    throw Unprocessable("job_id: a job's report goes to POST /api/v1/jobs/" + std::to_string(*report.job_id) +
                        "/report");
  }
  // Detection only reads earlier runs, so it runs on a second connection
  // while this one stores the report.
  auto planned = std::async(std::launch::async, [&] {
    return with_transaction(
        *pool_, [&](pqxx::work& tx) { return DetectionRepository::plan(tx, report.project, report); });
  });
  std::shared_ptr<const DetectionRepository::Plan> plan;  // taken once, even if the transaction is retried
  // The identity of a report: its validated document with keys sorted
  // (nlohmann keeps objects ordered), so a re-post, however formatted, matches.
  if (job_id) document["job_id"] = *job_id;
  std::string canonical = document.dump();

  StoredRun stored = with_transaction(*pool_, [&](pqxx::work& tx) {
    std::int64_t project_id = RunRepository::ensure_project(tx, report.project);
    if (job_id) {
      auto hold = JobRepository::lock(tx, *job_id);
      if (!hold) throw NotFound("no job " + std::to_string(*job_id));
      if (hold->project_id != project_id)
        throw Unprocessable("project: does not match job " + std::to_string(*job_id));
      if (hold->commit != report.commit) {
        throw Unprocessable("commit: is " + report.commit + " but job " + std::to_string(*job_id) +
                            " is for " + hold->commit);
      }
      std::int64_t agent_id = agent_for(tx, request, report.agent.name);
      bool holds = hold->state == "running" && hold->agent_id == agent_id;
      if (!holds) {
        // A retry of a report that was already accepted is answered as before.
        if (auto previous = RunRepository::find_stored(tx, project_id, canonical)) return *previous;
        throw Conflict("agent \"" + report.agent.name + "\" does not hold job " + std::to_string(*job_id) +
                       " (state " + hold->state + ")");
      }
    }
    StoredRun result = RunRepository::store(tx, project_id, report, document, canonical, job_id);
    if (!result.duplicate) {
      if (!plan) plan = planned.get();
      result.verdict = DetectionRepository::finish(tx, result.run_id, *plan, report);
      if (job_id) JobRepository::complete(tx, *job_id);
      NotificationRepository::verdict(tx, options_.notifications, result.run_id);
    }
    return result;
  });

  json answer{{"run_id", stored.run_id},
              {"verdict", stored.verdict},
              {"duplicate", stored.duplicate},
              {"url", "/api/v1/runs/" + std::to_string(stored.run_id)}};
  if (job_id) answer["job_id"] = *job_id;
  return Response::json(stored.duplicate ? 200 : 201, answer);
}

void App::register_routes() {
  Router& r = *router_;
  const Access agent = Access::of({Scope::agent});
  const Access ci = Access::of({Scope::ci});

  // From the monitor's last ping: never waits on the database.
  r.add("GET", "/healthz", Access::read(), [this](Request&) {
    if (!monitor_->available()) throw ServiceUnavailable(monitor_->problem());
    return Response::json(200, {{"status", "ok"},
                                {"schema_version", schema_version_},
                                {"database_ping_ms", monitor_->last_ping_ms()}});
  });

  r.add("GET", "/metrics", Access::read(), [this](Request&) {
    Response response;
    response.content_type = "text/plain; version=0.0.4";
    response.body = metrics_.render();
    return response;
  });

  r.add("POST", "/api/v1/runs", agent, [this](Request& request) { return ingest(request, std::nullopt); });

  r.add("GET", "/api/v1/runs/{id}", Access::read(), [this](Request& request) {
    std::int64_t id = request.id_param("id");
    auto text = with_transaction(*pool_, [&](pqxx::work& tx) { return RunRepository::run_json(tx, id); });
    if (!text) throw NotFound("no run " + std::to_string(id));
    return Response::json_text(200, std::move(*text));
  });

  r.add("POST", "/api/v1/jobs", ci, [this](Request& request) {
    json body = require_object(request);
    NewJob job;
    std::string project = body_string(body, "project");
    common::check_project_name(project, "project");
    job.commit = body_string(body, "commit");
    if (!common::is_commit_sha(job.commit))
      throw Unprocessable("commit: must be a 40-character lowercase hex SHA");
    job.branch = body_string(body, "branch");
    std::string base = body_string(body, "base_commit", false);
    if (!base.empty()) {
      if (!common::is_commit_sha(base))
        throw Unprocessable("base_commit: must be a 40-character lowercase hex SHA");
      job.base_commit = base;
    }
    job.pr = body_integer(body, "pr", 1, common::kMaxInt32);
    std::string gpu_class = body_string(body, "gpu_class", false);
    if (!gpu_class.empty()) job.gpu_class = gpu_class;
    job.max_attempts = options_.max_attempts;
    auto [id, created, document] = with_transaction(*pool_, [&](pqxx::work& tx) {
      job.project_id = RunRepository::ensure_project(tx, project);
      auto [job_id, was_created] = JobRepository::create(tx, job);
      json job_json = *JobRepository::get(tx, job_id);
      if (was_created)
        NotificationRepository::job_queued(tx, options_.notifications, job.project_id, job_json);
      return std::make_tuple(job_id, was_created, job_json);
    });
    return Response::json(created ? 201 : 200, document);
  });

  r.add("GET", "/api/v1/jobs/{id}", Access::read(), [this](Request& request) {
    std::int64_t id = request.id_param("id");
    auto job = with_transaction(*pool_, [&](pqxx::work& tx) { return JobRepository::get(tx, id); });
    if (!job) throw NotFound("no job " + std::to_string(id));
    return Response::json(200, *job);
  });

  r.add("POST", "/api/v1/agents/claim", agent, [this](Request& request) {
    json body = require_object(request);
    std::string name = body_string(body, "agent");
    std::string host = body_string(body, "host", false);
    std::string version = body_string(body, "version", false);
    json gpus = body.value("gpus", json::array());
    if (!gpus.is_array()) throw Unprocessable("gpus: must be an array of GPU model names");
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].is_string()) throw Unprocessable("gpus[" + std::to_string(i) + "]: must be a string");
    }
    auto job = with_transaction(*pool_, [&](pqxx::work& tx) -> std::optional<json> {
      auto agent_id = JobRepository::upsert_agent(tx, name, request.caller->token_id,
                                                  request.caller->scope == Scope::admin, host, version, gpus);
      if (!agent_id) throw Conflict("agent name \"" + name + "\" is registered under another token");
      JobRepository::requeue_expired(tx);
      auto job_id = JobRepository::claim(tx, *agent_id, gpus, options_.lease_seconds);
      if (!job_id) return std::nullopt;
      return JobRepository::get(tx, *job_id);
    });
    if (!job) {
      Response response;
      response.status = 204;
      response.content_type = "text/plain";
      return response;
    }
    (*job)["lease_seconds"] = options_.lease_seconds;
    return Response::json(200, *job);
  });

  // What the holder of a running job does to it: `action` returns false
  // when this agent does not hold the job, answered 404 or 409.
  auto as_holder = [this](Request& request, const json& body, const char* verb,
                          const std::function<bool(pqxx::work&, std::int64_t, std::int64_t)>& action) {
    std::int64_t id = request.id_param("id");
    std::string name = body_string(body, "agent");
    auto job = with_transaction(*pool_, [&](pqxx::work& tx) {
      std::int64_t agent_id = agent_for(tx, request, name);
      if (!action(tx, id, agent_id)) {
        auto current = JobRepository::get(tx, id);
        if (!current) throw NotFound("no job " + std::to_string(id));
        throw Conflict("agent \"" + name + "\" does not hold job " + std::to_string(id) + " (state " +
                       current->value("state", "") + "); cannot " + verb);
      }
      return *JobRepository::get(tx, id);
    });
    return Response::json(200, job);
  };
  auto holder_action = [this, as_holder](const char* verb,
                                         bool (*action)(pqxx::work&, std::int64_t, std::int64_t, double)) {
    return [this, as_holder, verb, action](Request& request) {
      return as_holder(request, require_object(request), verb,
                       [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                         return action(tx, id, agent_id, options_.lease_seconds);
                       });
    };
  };
  r.add("POST", "/api/v1/jobs/{id}/heartbeat", agent, holder_action("heartbeat", &JobRepository::heartbeat));
  r.add("POST", "/api/v1/jobs/{id}/release", agent,
        holder_action("release", [](pqxx::work& tx, std::int64_t job, std::int64_t agent_id, double) {
          return JobRepository::release(tx, job, agent_id);
        }));

  r.add("POST", "/api/v1/jobs/{id}/stages", agent, [this, as_holder](Request& request) {
    json body = require_object(request);
    StageProgress progress = stage_progress(body);
    return as_holder(request, body, "record a stage",
                     [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
                       return JobRepository::record_stage(tx, id, agent_id, options_.lease_seconds, progress);
                     });
  });

  r.add("POST", "/api/v1/jobs/{id}/fail", agent, [this, as_holder](Request& request) {
    json body = require_object(request);
    std::string reason = body_string(body, "reason", true, common::kMaxTextBytes);
    if (reason.size() > 4096) throw Unprocessable("reason: at most 4096 bytes");
    std::string error = "agent \"" + body_string(body, "agent") + "\" could not run it: " + reason;
    return as_holder(request, body, "fail it", [&](pqxx::work& tx, std::int64_t id, std::int64_t agent_id) {
      if (!JobRepository::fail(tx, id, agent_id, error)) return false;
      json job = *JobRepository::get(tx, id);
      std::int64_t project_id =
          tx.exec_params1("SELECT project_id FROM jobs WHERE id = $1", id)[0].as<std::int64_t>();
      NotificationRepository::job_failed(tx, options_.notifications, project_id, job);
      return true;
    });
  });

  r.add("POST", "/api/v1/jobs/{id}/report", agent,
        [this](Request& request) { return ingest(request, request.id_param("id")); });

  r.add("GET", "/api/v1/projects", Access::read(), [this](Request&) {
    return Response::json_text(
        200, with_transaction(*pool_, [](pqxx::work& tx) { return RunRepository::projects_json(tx); }));
  });

  r.add("GET", "/api/v1/projects/{project}", Access::read(), [this](Request& request) {
    return Response::json(
        200, with_transaction(*pool_, [&](pqxx::work& tx) {
          return DetectionRepository::settings(tx, project_id_or_404(tx, request.param("project"))).to_json();
        }));
  });

  r.add("PUT", "/api/v1/projects/{project}/settings", Access::of({}), [this](Request& request) {
    json changes = require_object(request);
    return Response::json(200, with_transaction(*pool_, [&](pqxx::work& tx) {
                            std::int64_t id = RunRepository::ensure_project(tx, request.param("project"));
                            return DetectionRepository::update_settings(tx, id, changes).to_json();
                          }));
  });

  r.add("POST", "/api/v1/runs/{id}/acknowledge", ci, [this](Request& request) {
    std::int64_t id = request.id_param("id");
    json body = require_object(request);
    std::string reason = body_string(body, "reason", true, common::kMaxTextBytes);
    std::string who = request.caller->token_name;
    with_transaction(*pool_, [&](pqxx::work& tx) {
      auto previous = DetectionRepository::acknowledge(tx, id, who, reason);
      if (!previous) throw NotFound("no run " + std::to_string(id));
      if (*previous != "regression") {
        throw Conflict("run " + std::to_string(id) + " has verdict " + *previous +
                       "; only a regression can be acknowledged");
      }
      NotificationRepository::verdict(tx, options_.notifications, id);
    });
    auto text = with_transaction(*pool_, [&](pqxx::work& tx) { return RunRepository::run_json(tx, id); });
    return Response::json_text(200, std::move(*text));
  });

  r.add("GET", "/api/v1/compare", Access::read(), [this](Request& request) {
    std::string base = request.query_value("base").value_or("");
    std::string head = request.query_value("head").value_or("");
    if (!common::is_commit_sha(base))
      throw BadRequest("base: must be a 40-character lowercase hex commit SHA");
    if (!common::is_commit_sha(head))
      throw BadRequest("head: must be a 40-character lowercase hex commit SHA");
    std::string gpu = request.query_value("gpu").value_or("");
    return Response::json(
        200, with_transaction(*pool_, [&](pqxx::work& tx) {
          std::int64_t project_id = 0;
          if (auto project = request.query_value("project")) {
            project_id = project_id_or_404(tx, *project);
          } else {
            pqxx::result projects =
                tx.exec_params("SELECT DISTINCT project_id FROM runs WHERE commit_sha = $1", head);
            if (projects.empty()) throw NotFound("no run of commit " + head);
            if (projects.size() > 1)
              throw BadRequest("commit " + head + " has runs in several projects; add project=");
            project_id = projects[0][0].as<std::int64_t>();
          }
          return DetectionRepository::compare_commits(tx, project_id, base, head, gpu);
        }));
  });

  r.set_static([this](const Request& request) { return static_file(options_.dashboard_dir, request); });

  r.add("GET", "/api/v1/projects/{project}/overview", Access::read(), [this](Request& request) {
    std::string gpu = request.query_value("gpu").value_or("");
    return Response::json_text(200, with_transaction(*pool_, [&](pqxx::work& tx) {
                                 std::int64_t project_id = project_id_or_404(tx, request.param("project"));
                                 std::string branch = request.query_value("branch").value_or("");
                                 if (branch.empty())
                                   branch = DetectionRepository::settings(tx, project_id).default_branch;
                                 return RunRepository::overview_json(tx, project_id, branch, gpu);
                               }));
  });

  r.add("GET", "/api/v1/projects/{project}/cases", Access::read(), [this](Request& request) {
    return Response::json_text(200, with_transaction(*pool_, [&](pqxx::work& tx) {
                                 return RunRepository::cases_json(
                                     tx, project_id_or_404(tx, request.param("project")));
                               }));
  });

  r.add("GET", "/api/v1/projects/{project}/runs", Access::read(), [this](Request& request) {
    int limit = limit_param(request, 100, 1000);
    std::string branch = request.query_value("branch").value_or("");
    return Response::json_text(200, with_transaction(*pool_, [&](pqxx::work& tx) {
                                 return RunRepository::runs_json(
                                     tx, project_id_or_404(tx, request.param("project")), branch, limit);
                               }));
  });

  r.add("GET", "/api/v1/projects/{project}/series", Access::read(), [this](Request& request) {
    auto case_name = request.query_value("case");
    if (!case_name || case_name->empty()) throw BadRequest("case: query parameter is required");
    int limit = limit_param(request, 1000, 10000);
    std::string gpu = request.query_value("gpu").value_or("");
    return Response::json_text(
        200, with_transaction(*pool_, [&](pqxx::work& tx) {
          std::int64_t project_id = project_id_or_404(tx, request.param("project"));
          std::string branch = request.query_value("branch").value_or("");
          if (branch.empty()) {
            branch = tx.exec_params1("SELECT default_branch FROM projects WHERE id = $1", project_id)[0]
                         .as<std::string>();
          }
          return RunRepository::series_json(tx, project_id, *case_name, gpu, branch, limit);
        }));
  });
}

}  // namespace kw::server
