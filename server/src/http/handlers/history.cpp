// A project's history as the dashboard reads it: the projects, overview,
// cases, runs, regressions, branches and series. Access and parameters are
// checked here; the reads are HistoryReads', the overview's and series'
// answers kept in the read cache until their project is written.
#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/handlers/request_fields.hpp"
#include "kw/common/stats.hpp"

namespace kw::server {

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

std::string found(std::optional<std::string> answer, const std::string& project) {
  if (!answer) throw NotFound("no_such_project", "no project \"" + project + "\"");
  return std::move(*answer);
}

// The project the path names, once the caller may read it.
const std::string& readable(const Request& request) {
  const std::string& project = request.param("project");
  require_access(request.reader(), project);
  return project;
}

// The audit's miss rates with their 95% upper bounds, by case and by job (a
// run that audits 2,000 cases counts once there): a rate of 0 of 3 says
// little, and its bound, 63%, says how little.
nlohmann::json with_miss_bounds(nlohmann::json audit) {
  const auto audited = audit.value("audited", std::int64_t{0}),
             misses = audit.value("misses", std::int64_t{0});
  const auto jobs = audit.value("jobs_audited", std::int64_t{0}),
             jobs_missed = audit.value("jobs_missed", std::int64_t{0});
  audit["miss_rate_upper_95"] =
      audited > 0 ? nlohmann::json(common::binomial_upper_bound(misses, audited)) : nullptr;
  audit["job_miss_rate"] =
      jobs > 0 ? nlohmann::json(static_cast<double>(jobs_missed) / static_cast<double>(jobs)) : nullptr;
  audit["job_miss_rate_upper_95"] =
      jobs > 0 ? nlohmann::json(common::binomial_upper_bound(jobs_missed, jobs)) : nullptr;
  return audit;
}

// The project's pages that are read whole: not cached, not paged.
void add_whole_project_reads(Router& router, HistoryReads& reads) {
  router.add("GET", "/api/v1/projects/{project}/cases", Access::read(), [&reads](Request& request) {
    const std::string& project = readable(request);
    return Response::json_text(200, found(reads.cases(project), project));
  });

  router.add("GET", "/api/v1/projects/{project}/audit", Access::read(), [&reads](Request& request) {
    const std::string& project = readable(request);
    return Response::json(200, with_miss_bounds(nlohmann::json::parse(found(reads.audit(project), project))));
  });

  router.add("GET", "/api/v1/projects/{project}/branches", Access::read(), [&reads](Request& request) {
    const std::string& project = readable(request);
    return Response::json_text(200, found(reads.branches(project), project));
  });
}

}  // namespace

void add_history_routes(Router& router, HistoryReads& reads, ReadCache& cache) {
  // The projects the caller's token names (all of them for an unscoped token
  // or an open read).
  router.add("GET", "/api/v1/projects", Access::read(), [&reads](Request& request) {
    std::optional<std::vector<std::string>> only;
    if (request.caller) only = request.caller->projects;
    return Response::json_text(200, reads.projects(only));
  });
  add_whole_project_reads(router, reads);

  // One page of cases (default 500): the newest run of each case and GPU
  // model, those the filter keeps.
  router.add("GET", "/api/v1/projects/{project}/overview", Access::read(), [&](Request& request) {
    const CaseFilter filter = case_filter(request);
    const std::string branch = request.query_value("branch").value_or("");
    const Page page = page_params(request, 500);
    const std::string& project = readable(request);
    return cached(cache, project,
                  cache_key({"overview", filter.gpu_model, filter.name_like, filter.statuses, branch,
                             std::to_string(page.number), std::to_string(page.per_page)}),
                  [&] { return found(reads.overview(project, branch, filter, page), project); });
  });

  for (bool regressions : {false, true}) {
    const char* route =
        regressions ? "/api/v1/projects/{project}/regressions" : "/api/v1/projects/{project}/runs";
    router.add("GET", route, Access::read(), [&reads, regressions](Request& request) {
      Page page;
      page.per_page = int_param(request, "limit", 100, 1000);
      page.number = int_param(request, "page", 1, 1000000);
      const CaseFilter filter = case_filter(request, false);
      const std::string branch = request.query_value("branch").value_or("");
      const std::string& project = readable(request);
      return Response::json_text(200, found(reads.runs(project, branch, filter, page, regressions), project));
    });
  }

  router.add("GET", "/api/v1/projects/{project}/series", Access::read(), [&](Request& request) {
    auto case_name = request.query_value("case");
    if (!case_name || case_name->empty()) throw BadRequest("bad_query", "case: query parameter is required");
    const int limit = int_param(request, "limit", 1000, 10000);
    const std::string gpu = request.query_value("gpu").value_or("");
    const std::string branch = request.query_value("branch").value_or("");
    const std::string& project = readable(request);
    return cached(cache, project, cache_key({"series", *case_name, gpu, branch, std::to_string(limit)}),
                  [&] { return found(reads.series(project, *case_name, gpu, branch, limit), project); });
  });
}

}  // namespace kw::server
