#include <algorithm>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"

namespace kw::server {

using nlohmann::json;

Response ingest_report(IngestService& ingest, Request& request, std::optional<std::int64_t> job_id) {
  const auto started = std::chrono::steady_clock::now();
  json document = request.json_body();
  ingest.observe(IngestService::Phase::parse, std::chrono::steady_clock::now() - started);
  return stored_run(ingest.ingest(std::move(document), *request.caller, job_id), job_id);
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
  RunPageStream(RunService* runs, ReadableRun run, std::int64_t first, std::int64_t end)
      : runs_(runs), run_(run), first_(first), end_(end), next_(first) {}

  bool operator()(std::string& chunk) {
    constexpr std::int64_t kBatch = 100;
    const std::int64_t upto = std::min(end_, next_ + kBatch);
    if (next_ < end_) {
      std::string items =
          comparisons_ ? runs_->comparisons(run_, next_, upto) : runs_->cases(run_, next_, upto);
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
  RunService* runs_;
  ReadableRun run_;
  std::int64_t first_, end_, next_;
  bool comparisons_ = true;
  bool empty_ = true;
};

// One page of the run, streamed: the head, then the page's comparisons and
// cases read and sent 100 cases at a time, so neither PostgreSQL nor
// kw-server builds a page of thousands of cases (with every raw sample) at
// once.
Response run_page(RunService& runs, const Request& request) {
  std::int64_t id = request.id_param("id", "run");
  Page page = page_params(request, 500);
  CheckedRunHead checked = runs.head(request.reader(), id, page);
  RunHead& head = checked.head;
  head.json.pop_back();  // the closing brace: the page's arrays follow
  Response response = Response::json_text(200, std::move(head.json) + ",\"comparisons\":[");
  const std::int64_t first = std::min(page.offset(), head.cases);
  response.stream =
      RunPageStream{&runs, checked.run, first, std::min(head.cases, page.offset() + page.per_page)};
  return response;
}

Response acknowledge(RunService& runs, const Request& request) {
  std::int64_t id = request.id_param("id", "run");
  const std::string reason = body_string(require_object(request), "reason", true, common::kMaxTextBytes);
  Acknowledgement acknowledged = runs.acknowledge(*request.caller, id, reason);
  acknowledged.head.pop_back();  // the closing brace
  return Response::json_text(
      200, std::move(acknowledged.head) + ",\"carried_to\":" + json(acknowledged.carried_to).dump() + "}");
}

}  // namespace

void add_run_routes(Router& router, IngestService& ingest, RunService& runs) {
  router.add("POST", "/api/v1/runs", Access::agent_reports(),
             [&ingest](Request& request) { return ingest_report(ingest, request, std::nullopt); });
  router.add("POST", "/api/v1/jobs/{id}/report", Access::agent_reports(), [&ingest](Request& request) {
    return ingest_report(ingest, request, request.id_param("id", "job"));
  });

  router.add("GET", "/api/v1/runs/{id}", Access::read(),
             [&runs](Request& request) { return run_page(runs, request); });

  router.add("GET", "/api/v1/runs/{id}/explanation", Access::read(), [&runs](Request& request) {
    return Response::json(200, runs.explanation(request.reader(), request.id_param("id", "run"),
                                                request.query_value("case").value_or("")));
  });

  router.add("POST", "/api/v1/runs/{id}/acknowledge", Access::of({Scope::ci}),
             [&runs](Request& request) { return acknowledge(runs, request); });

  // base and head: a commit SHA, a prefix of at least 7 hex digits of a
  // measured commit, or a branch (its newest measured commit).
  router.add("GET", "/api/v1/compare", Access::read(), [&runs](Request& request) {
    const CaseFilter filter = case_filter(request);
    const Page page = page_params(request, 500);
    return Response::json(200, runs.compare(request.reader(), request.query_value("project"),
                                            request.query_value("base").value_or(""),
                                            request.query_value("head").value_or(""), filter, page));
  });
}

}  // namespace kw::server
