// Every service kw-server's routes call, made together over one pool. The
// rules of the write side live here, between the HTTP handlers (which parse
// and answer) and the store (which runs SQL).
#pragma once

#include "notify/notifier.hpp"
#include "service/ingest_service.hpp"
#include "service/job_service.hpp"
#include "service/profile_service.hpp"
#include "service/project_store.hpp"
#include "service/run_service.hpp"
#include "service/settings_service.hpp"
#include "service/token_service.hpp"
#include "service/upload_service.hpp"
#include "store/database.hpp"
#include "store/read_routing.hpp"

namespace kw::server {

struct Services {
  Services(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications,
           QueueSettings queue, UploadLimits uploads)
      : ingest(pool, reads, notifications, queue.max_attempts),
        runs(pool, reads, notifications),
        job_store(pool, notifications),
        jobs(job_store, queue),
        bisects(pool),
        profiles(pool, notifications, queue.max_attempts),
        uploads_in_parts(pool, ingest, uploads),
        projects(pool, reads, notifications),
        settings(projects, notifications),
        tokens(projects) {}

  IngestService ingest;
  RunService runs;
  PgJobStore job_store;  // before the service on it
  JobService jobs;
  BisectService bisects;
  ProfileService profiles;
  UploadService uploads_in_parts;
  PgProjectStore projects;  // before the services on it
  SettingsService settings;
  TokenService tokens;
};

}  // namespace kw::server
