// Ingest of one run report: validate, store, judge, notify, in one
// transaction. What the HTTP layer calls for POST /runs and a job's report;
// it never sees a socket or a request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "notify/notifier.hpp"
#include "store/database.hpp"
#include "store/read_routing.hpp"

namespace kw::server {

struct IngestResult {
  std::int64_t run_id = 0;
  std::string verdict;
  bool duplicate = false;  // the same report was stored before; nothing new was written
};

class IngestService {
 public:
  // `max_attempts`: of the profile jobs a regression queues.
  IngestService(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications,
                int max_attempts)
      : pool_(pool), reads_(reads), notifications_(notifications), max_attempts_(max_attempts) {}

  // `document` is the posted report; `job_id` the job it answers, if any.
  // Throws Unprocessable (the contract), NotFound (no project or job),
  // Forbidden (a project the caller's token does not name) or Conflict (a
  // job the agent does not hold, an agent name of another token).
  IngestResult ingest(nlohmann::json document, const Caller& caller, std::optional<std::int64_t> job_id);

 private:
  ConnectionPool& pool_;
  ReadRouting& reads_;
  const NotifierOptions& notifications_;
  int max_attempts_;
};

}  // namespace kw::server
