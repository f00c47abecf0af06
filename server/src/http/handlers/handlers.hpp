// The routes of kw-server, one file per resource. A handler parses the
// request, makes one service call and builds the response (it opens no
// transaction: the services do); handlers run on the HTTP server's worker
// pools, never on its I/O threads.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "http/metrics.hpp"
#include "http/router.hpp"
#include "service/bisect_service.hpp"
#include "service/history_reads.hpp"
#include "service/ingest_service.hpp"
#include "service/job_service.hpp"
#include "service/profile_service.hpp"
#include "service/read_cache.hpp"
#include "service/run_service.hpp"
#include "service/settings_service.hpp"
#include "service/token_service.hpp"
#include "service/upload_service.hpp"

namespace kw::server {

// What the health routes read, owned by App.
struct HealthContext {
  // /healthz answers from the database monitor's last ping: nullopt while
  // the database answers, else why not; and that ping's round trip.
  std::function<std::optional<std::string>()> database_problem;
  std::function<double()> database_ping_ms;
  Metrics& metrics;
  int schema_version = 0;
};

void add_health_routes(Router& router, const HealthContext& context);  // /healthz, /metrics
// The other routes are over their services alone, so tests serve them from
// a stand-in of the services' store. /api/v1/runs, /api/v1/compare, and a
// job's report (/api/v1/jobs/{id}/report):
void add_run_routes(Router& router, IngestService& ingest, RunService& runs);
// The queue's: /api/v1/jobs and /api/v1/agents.
void add_job_routes(Router& router, JobService& jobs);
void add_agent_routes(Router& router, JobService& jobs);
void add_bisect_routes(Router& router, BisectService& bisects);  // /api/v1/bisects
// /api/v1/runs/{id}/profiles, /api/v1/profiles, /api/v1/jobs/{id}/profile
void add_profile_routes(Router& router, ProfileService& profiles);
void add_project_routes(Router& router, SettingsService& settings);  // /api/v1/projects
// GET /api/v1/projects and a project's overview, cases, runs, regressions,
// branches and series: only the reads and the cache, so tests can serve them
// from a stand-in.
void add_history_routes(Router& router, HistoryReads& reads, ReadCache& cache);
void add_token_routes(Router& router, TokenService& tokens);  // /api/v1/tokens
// /api/v1/projects/{p}/uploads: a run report sent in parts.
void add_upload_routes(Router& router, UploadService& uploads, IngestService& ingest);
// The request's run report ingested: 201 with the new run, or 200 for a
// report stored before (runs.cpp).
Response ingest_report(IngestService& ingest, Request& request, std::optional<std::int64_t> job_id);
// What a report's route answers once it is stored (or was before).
Response stored_run(const IngestResult& stored, std::optional<std::int64_t> job_id);

// GET /download/kw and /download/kw.sha256: the kw binary at `kw_binary`
// (empty: none), for CI jobs to fetch instead of building it.
void add_download_routes(Router& router, const std::string& kw_binary);

// The built dashboard under `root` (empty: none) for GET paths no route has.
void add_static_files(Router& router, std::string root);

}  // namespace kw::server
