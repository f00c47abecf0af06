// Every service kw-server's routes call, made together over one pool, each
// on its store's PostgreSQL side (store/pg_*_store.hpp). The
// rules of the write side live here, between the HTTP handlers (which parse
// and answer) and the store (which runs SQL).
#pragma once

#include "notify/notifier.hpp"
#include "service/bisect_service.hpp"
#include "service/ingest_service.hpp"
#include "service/job_service.hpp"
#include "service/profile_service.hpp"
#include "service/run_service.hpp"
#include "service/settings_service.hpp"
#include "service/token_service.hpp"
#include "service/upload_service.hpp"
#include "store/database.hpp"
#include "store/pg_bisect_store.hpp"
#include "store/pg_job_store.hpp"
#include "store/pg_profile_store.hpp"
#include "store/pg_project_store.hpp"
#include "store/pg_run_store.hpp"
#include "store/pg_upload_store.hpp"
#include "store/read_routing.hpp"

namespace kw::server {

// The prepared statements of every store, for the pool the services share.
std::vector<Statement> all_statements();

struct Services {
  Services(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications,
           QueueSettings queue, UploadLimits uploads)
      : run_store(pool, reads, notifications),
        ingest(run_store, queue.max_attempts),
        runs(run_store),
        job_store(pool, notifications),
        jobs(job_store, queue),
        bisect_store(pool),
        bisects(bisect_store),
        profile_store(pool, notifications),
        profiles(profile_store, queue.max_attempts),
        upload_store(pool),
        uploads_in_parts(upload_store, ingest, uploads),
        projects(pool, reads, notifications),
        settings(projects, notifications),
        tokens(projects) {}

  PgRunStore run_store;  // before the services on it
  IngestService ingest;
  RunService runs;
  PgJobStore job_store;  // before the service on it
  JobService jobs;
  PgBisectStore bisect_store;  // before the service on it
  BisectService bisects;
  PgProfileStore profile_store;  // before the service on it
  ProfileService profiles;
  PgUploadStore upload_store;  // before the service on it
  UploadService uploads_in_parts;
  PgProjectStore projects;  // before the services on it
  SettingsService settings;
  TokenService tokens;
};

}  // namespace kw::server
