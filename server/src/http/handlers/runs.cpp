#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "store/detection_repository.hpp"
#include "store/explanation_repository.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

using nlohmann::json;

Response ingest_report(const HandlerContext& context, Request& request, std::optional<std::int64_t> job_id) {
  const auto started = std::chrono::steady_clock::now();
  json document = request.json_body();
  context.ingest.observe(IngestService::Phase::parse, std::chrono::steady_clock::now() - started);
  return stored_run(context.ingest.ingest(std::move(document), *request.caller, job_id), job_id);
}

Response stored_run(const IngestResult& stored, std::optional<std::int64_t> job_id) {
  json shard;
  if (const auto& receipt = stored.shard) {
    shard = {{"job_id", receipt->job_id},
             {"index", receipt->index},
             {"count", receipt->count},
             {"waiting_for", receipt->waiting_for},
             {"state", receipt->state}};
    if (!receipt->error.empty()) shard["error"] = receipt->error;
    // Taken; the run is made when the last shard's report is in.
    if (stored.run_id == 0) return Response::json(202, {{"job_id", *job_id}, {"shard", shard}});
  }
  json answer{{"run_id", stored.run_id},
              {"verdict", stored.verdict},
              {"duplicate", stored.duplicate},
              {"url", "/api/v1/runs/" + std::to_string(stored.run_id)}};
  if (job_id) answer["job_id"] = *job_id;
  if (!shard.is_null()) answer["shard"] = shard;
  return Response::json(stored.duplicate ? 200 : 201, answer);
}

namespace {

// The parts after a run's head: the comparisons, then the cases, of the case
// ordinals [first, end), each read kBatch cases at a time, then the closing
// brackets.
class RunPageStream {
 public:
  RunPageStream(ConnectionPool* pool, std::int64_t run_id, std::int64_t first, std::int64_t end)
      : pool_(pool), run_id_(run_id), first_(first), end_(end), next_(first) {}

  bool operator()(std::string& chunk) {
    constexpr std::int64_t kBatch = 100;
    const std::int64_t upto = std::min(end_, next_ + kBatch);
    if (next_ < end_) {
      std::string items = with_transaction(*pool_, [&](pqxx::work& tx) {
        return comparisons_ ? RunRepository::run_comparisons_json(tx, run_id_, next_, upto)
                            : RunRepository::run_cases_json(tx, run_id_, next_, upto);
      });
      if (items.size() > 2) {  // "[...]": the items without the brackets
        if (!empty_) chunk += ',';
        chunk.append(items, 1, items.size() - 2);
        empty_ = false;
      }
      next_ = upto;
      if (next_ < end_) return true;
    }
    if (!comparisons_) {
      chunk += "]}";
      return false;
    }
    chunk += "],\"cases\":[";
    comparisons_ = false;
    empty_ = true;
    next_ = first_;
    return true;
  }

 private:
  ConnectionPool* pool_;
  std::int64_t run_id_, first_, end_, next_;
  bool comparisons_ = true;
  bool empty_ = true;
};

}  // namespace

namespace {

bool is_hex_prefix(const std::string& text) {
  return text.size() >= 7 && text.size() < 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The commit a client names in `field` (project_id 0: any project; only
// for a caller who may read every project).
std::string resolve_revision(pqxx::work& tx, std::int64_t project_id, const std::string& field,
                             const std::string& text) {
  if (text.empty())
    throw BadRequest("bad_query",
                     field + ": is required (a commit SHA, 7 or more of its first hex digits, or a branch)");
  if (common::is_commit_sha(text)) return text;
  if (is_hex_prefix(text)) {
    std::vector<std::string> commits = RunRepository::measured_commits_with_prefix(tx, project_id, text, 4);
    if (commits.size() == 1) return commits[0];
    if (commits.size() > 1) {
      std::string some;
      for (const std::string& commit : commits) some += (some.empty() ? "" : ", ") + commit.substr(0, 12);
      throw BadRequest("ambiguous_revision", field + ": " + text + " starts several measured commits (" +
                                                 some + "); give more digits");
    }
  }
  auto commit = RunRepository::newest_commit_on_branch(tx, project_id, text);
  if (!commit) throw NotFound("no_such_commit", field + ": no run of a commit or branch \"" + text + "\"");
  return *commit;
}

// The project a compare looks in: the one named, else the one a scoped
// token reaches; 0 (every project) only for a caller who may read them all,
// so no answer names a commit, branch or project the caller cannot read.
std::int64_t compare_project(pqxx::work& tx, const Request& request) {
  if (auto project = request.query_value("project")) return readable_project(tx, request, *project);
  if (!request.caller || !request.caller->projects) return 0;
  const std::vector<std::string>& reachable = *request.caller->projects;
  if (reachable.size() > 1)
    throw BadRequest("bad_query", "project: is required (token \"" + request.caller->token_name +
                                      "\" reaches several projects)");
  return readable_project(tx, request, reachable.front());
}

}  // namespace

void add_run_routes(Router& router, const HandlerContext& context) {
  const Access agent = Access::of({Scope::agent});
  const Access ci = Access::of({Scope::ci});

  router.add("POST", "/api/v1/runs", Access::agent_reports(),
             [&context](Request& request) { return ingest_report(context, request, std::nullopt); });

  // One page of the run, streamed: the head, then the page's comparisons and
  // cases read and sent 100 cases at a time, so neither PostgreSQL nor
  // kw-server builds a page of thousands of cases (with every raw sample) at
  // once.
  router.add("GET", "/api/v1/runs/{id}", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "run");
    Page page = page_params(request, 500);
    auto head = with_transaction(context.pool, [&](pqxx::work& tx) -> std::optional<RunHead> {
      auto project = RunRepository::project_of_run(tx, id);
      if (!project) return std::nullopt;
      check_project(request, *project);
      return RunRepository::run_head(tx, id, page);
    });
    if (!head) throw NotFound("no_such_run", "no run " + std::to_string(id));
    head->json.pop_back();  // the closing brace: the page's arrays follow
    Response response = Response::json_text(200, std::move(head->json) + ",\"comparisons\":[");
    const std::int64_t first = std::min(page.offset(), head->cases);
    response.stream =
        RunPageStream{&context.pool, id, first, std::min(head->cases, page.offset() + page.per_page)};
    return response;
  });

  router.add("GET", "/api/v1/runs/{id}/explanation", Access::read(), [&context](Request& request) {
    std::int64_t id = request.id_param("id", "run");
    return Response::json(200, with_transaction(context.pool, [&](pqxx::work& tx) {
                            auto project = RunRepository::project_of_run(tx, id);
                            if (!project) throw NotFound("no_such_run", "no run " + std::to_string(id));
                            check_project(request, *project);
                            return *ExplanationRepository::explain(tx, id,
                                                                   request.query_value("case").value_or(""));
                          }));
  });

  router.add("POST", "/api/v1/runs/{id}/acknowledge", ci, [&context](Request& request) {
    std::int64_t id = request.id_param("id", "run");
    json body = require_object(request);
    std::string reason = body_string(body, "reason", true, common::kMaxTextBytes);
    std::string who = request.caller->token_name;
    std::vector<std::int64_t> carried_to;
    const std::string project = with_transaction(context.pool, [&](pqxx::work& tx) {
      auto owner = RunRepository::project_of_run(tx, id);
      if (!owner) throw NotFound("no_such_run", "no run " + std::to_string(id));
      request.caller->require_project(*owner);
      auto acknowledged = DetectionRepository::acknowledge(tx, id, who, reason);
      if (!acknowledged) throw NotFound("no_such_run", "no run " + std::to_string(id));
      if (acknowledged->previous_verdict != "regression") {
        throw Conflict("not_a_regression", "run " + std::to_string(id) + " has verdict " +
                                               acknowledged->previous_verdict +
                                               "; only a regression can be acknowledged");
      }
      NotificationRepository::verdict(tx, context.notifications, id);
      for (std::int64_t carried : acknowledged->carried_to)
        NotificationRepository::verdict(tx, context.notifications, carried);
      carried_to = acknowledged->carried_to;
      return *owner;
    });
    context.reads.committed(project);
    // The answer is the run's head (verdict, acknowledgement, stages), not
    // its cases with every raw sample.
    auto head = with_transaction(context.pool,
                                 [&](pqxx::work& tx) { return RunRepository::run_head(tx, id, Page{}); });
    head->json.pop_back();  // the closing brace
    return Response::json_text(200,
                               std::move(head->json) + ",\"carried_to\":" + json(carried_to).dump() + "}");
  });

  // base and head: a commit SHA, a prefix of at least 7 hex digits of a
  // measured commit, or a branch (its newest measured commit).
  router.add("GET", "/api/v1/compare", Access::read(), [&context](Request& request) {
    const std::string base_text = request.query_value("base").value_or("");
    const std::string head_text = request.query_value("head").value_or("");
    const CaseFilter filter = case_filter(request);
    const Page page = page_params(request, 500);
    return Response::json(
        200, with_transaction(context.pool, [&](pqxx::work& tx) {
          std::int64_t project_id = compare_project(tx, request);
          const std::string head = resolve_revision(tx, project_id, "head", head_text);
          if (project_id == 0) {
            std::vector<std::int64_t> projects = RunRepository::projects_with_commit(tx, head);
            if (projects.empty()) throw NotFound("no_such_commit", "no run of commit " + head);
            if (projects.size() > 1)
              throw BadRequest("bad_query", "commit " + head + " has runs in several projects; add project=");
            project_id = projects.front();
          }
          const std::string base = resolve_revision(tx, project_id, "base", base_text);
          return DetectionRepository::compare_commits(tx, project_id, base, head, filter, page);
        }));
  });
}

}  // namespace kw::server
