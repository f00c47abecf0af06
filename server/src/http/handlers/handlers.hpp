// The routes of kw-server, one file per resource. Handlers read the request,
// call the ingest service or the store, and build the response; they run on
// the HTTP server's worker pools, never on its I/O threads.
#pragma once

#include <optional>
#include <string>

#include "http/metrics.hpp"
#include "http/router.hpp"
#include "ingest/ingest_service.hpp"
#include "notify/notifier.hpp"
#include "store/database.hpp"
#include "store/history_reads.hpp"
#include "store/read_routing.hpp"
#include "store/upload_repository.hpp"

namespace kw::server {

// What the handlers use, owned by App.
struct HandlerContext {
  ConnectionPool& pool;
  DatabaseMonitor& monitor;
  Metrics& metrics;
  IngestService& ingest;
  ReadRouting& reads;  // told of every commit that changes what a history read shows
  const NotifierOptions& notifications;
  double lease_seconds = 120;
  int max_attempts = 3;
  int schema_version = 0;
  // What one run report may decompress to, whole or its parts together.
  std::size_t report_limit = std::size_t{64} * 1024 * 1024;
  UploadQuota upload_quota;
};

void add_health_routes(Router& router, const HandlerContext& context);  // /healthz, /metrics
void add_run_routes(Router& router, const HandlerContext& context);     // /api/v1/runs, /api/v1/compare
void add_job_routes(Router& router, const HandlerContext& context);     // /api/v1/jobs, /api/v1/bisects
// /api/v1/runs/{id}/profiles, /api/v1/profiles, /api/v1/jobs/{id}/profile
void add_profile_routes(Router& router, const HandlerContext& context);
void add_agent_routes(Router& router, const HandlerContext& context);    // /api/v1/agents
void add_project_routes(Router& router, const HandlerContext& context);  // /api/v1/projects
// GET /api/v1/projects and a project's overview, cases, runs, regressions,
// branches and series: only the reads and the cache, so tests can serve them
// from a stand-in.
void add_history_routes(Router& router, HistoryReads& reads, ReadCache& cache);
void add_token_routes(Router& router, const HandlerContext& context);  // /api/v1/tokens
// /api/v1/projects/{p}/uploads: a run report sent in parts.
void add_upload_routes(Router& router, const HandlerContext& context);
// The request's run report ingested: 201 with the new run, or 200 for a
// report stored before (runs.cpp).
Response ingest_report(const HandlerContext& context, Request& request, std::optional<std::int64_t> job_id);
// What a report's route answers once it is stored (or was before).
Response stored_run(const IngestResult& stored, std::optional<std::int64_t> job_id);

// GET /download/kw and /download/kw.sha256: the kw binary at `kw_binary`
// (empty: none), for CI jobs to fetch instead of building it.
void add_download_routes(Router& router, const std::string& kw_binary);

// The built dashboard under `root` (empty: none) for GET paths no route has.
void add_static_files(Router& router, std::string root);

}  // namespace kw::server
