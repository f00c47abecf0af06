// The rows of kw-server's database as the in-memory stand-in keeps them
// (in_memory_store.hpp): projects and tokens, the queue and its agents, the
// runs with their cases and comparisons, and the notices a transaction
// leaves. Ids count from 1 in each table, as PostgreSQL's sequences do. A
// run's report and what judging decided of it never change once written, so
// they are shared between a state and its copies (a transaction works on a
// copy).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "errors.hpp"
#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/sha256.hpp"
#include "model/bisects.hpp"
#include "model/jobs.hpp"
#include "model/settings.hpp"
#include "model/tokens.hpp"

namespace kw::server::testing {

struct MemoryJob {
  std::int64_t id = 0;
  NewJob asked;
  std::string state = "queued";
  std::string kind = "measure";
  int attempts = 0;
  int rerun = 0;
  bool on_default_branch = false;
  std::optional<std::int64_t> agent_id;
  std::optional<double> lease_expires;
  std::optional<std::string> error;
  std::optional<std::int64_t> parent;
  std::int64_t shard_index = 0;
  std::int64_t shards = 1;
  std::vector<StageProgress> stages;  // of the current attempt, by ordinal
  std::optional<nlohmann::json> shard_report;
  std::optional<double> pinned_at;  // a shard's GPU model pinned, on the state's clock
};

struct MemoryAgent {
  std::int64_t id = 0;
  std::string name, host, version;
  std::int64_t token_id = 0;
  std::optional<std::vector<std::string>> token_projects;
  nlohmann::json gpus = nlohmann::json::array();
  std::optional<nlohmann::json> gpu, health;
  bool can_profile = false;
};

struct Notice {
  std::string kind;  // job_queued, job_failed, profile_ended, bisect_ended or verdict
  std::int64_t job_id = 0, run_id = 0, bisect_id = 0;
};

// A case of a stored run: its report's case, what the rule summarized of
// it, and its status once the run is judged.
struct MemoryCase {
  std::int64_t id = 0;
  const common::Case* measured = nullptr;  // in its run's report
  const nlohmann::json* posted = nullptr;  // the case as posted
  common::CaseSummary summary;
  std::string status;  // its candidate's time comparison ("" until judged)
};

// What a run is stored with, fixed once written.
struct MemoryRunReport {
  common::RunReport report;
  nlohmann::json document;  // as validated into `report`
  std::string sha256;       // of its canonical form
};

struct MemoryAcknowledgement {
  std::string by, reason;
  std::optional<std::int64_t> from;  // carried from that run's
};

struct MemoryRun {
  std::int64_t id = 0;
  std::int64_t project_id = 0;
  std::optional<std::int64_t> job_id;
  std::string gpu_model;
  int rule_version = 0;
  std::shared_ptr<const MemoryRunReport> stored;
  std::shared_ptr<const std::vector<MemoryCase>> cases;  // in the report's order
  std::string verdict = "pending";
  nlohmann::json detection;                                        // null until judged
  std::shared_ptr<const std::vector<nlohmann::json>> comparisons;  // as GET /runs/{id} lists them
  std::optional<MemoryAcknowledgement> acknowledgement;

  const common::RunReport& report() const { return stored->report; }
  // The commit's git facts as posted (tree, author, ...), where it has them.
  const nlohmann::json& git(const char* key) const {
    static const nlohmann::json kNone;
    const nlohmann::json& document = stored->document;
    if (!document.contains("git") || !document["git"].contains(key)) return kNone;
    return document["git"][key];
  }
};

// A report being sent in parts.
struct MemoryUpload {
  std::int64_t project_id = 0;
  std::string id;
  std::int64_t token_id = 0;
  int parts = 0;
  std::optional<std::int64_t> run_id;
  std::optional<double> completing_since;    // on the state's clock
  std::optional<std::int64_t> shard_job_id;  // a shard's report its job took
  struct Part {
    std::string data;  // as sent
    bool gzip = false;
    std::int64_t decoded_bytes = 0;
    std::string sha256;
  };
  std::map<int, Part> received;
};

// A bisect and the regression run it searches.
struct MemoryBisect {
  Bisect bisect;
  std::int64_t run_id = 0;
  std::string created_at, updated_at;
};

struct MemoryToken {
  TokenInfo info;
  std::string secret;
};

struct MemoryState {
  double now = 0;                         // the leases' clock, moved by a test
  std::vector<ProjectSettings> projects;  // id - 1
  std::vector<MemoryToken> tokens;        // id - 1
  std::vector<MemoryJob> jobs;            // id - 1
  std::vector<MemoryAgent> agents;        // id - 1
  std::vector<MemoryRun> runs;            // id - 1
  std::vector<MemoryUpload> uploads;
  std::vector<MemoryBisect> bisects;  // id - 1
  std::int64_t cases = 0;             // the last case id taken
  std::vector<Notice> notices;
  std::vector<std::string> committed;  // projects whose writes this server's reads were told of

  ProjectSettings& project(std::int64_t id) { return projects.at(static_cast<std::size_t>(id - 1)); }
  const ProjectSettings* find_project(const std::string& name) const {
    for (const ProjectSettings& project : projects)
      if (project.name == name) return &project;
    return nullptr;
  }
  // The project's id; NotFound as RunRepository::existing_project_id says it.
  std::int64_t existing_project_id(const std::string& name) const {
    if (const ProjectSettings* found = find_project(name)) return found->id;
    throw NotFound("no_such_project", "no project \"" + name +
                                          "\"; an admin creates it (POST /api/v1/projects, or kw-server "
                                          "project create, or a token scoped to it)");
  }
  MemoryJob* job(std::int64_t id) {
    return id >= 1 && id <= static_cast<std::int64_t>(jobs.size()) ? &jobs[static_cast<std::size_t>(id - 1)]
                                                                   : nullptr;
  }
  MemoryRun* run(std::int64_t id) {
    return id >= 1 && id <= static_cast<std::int64_t>(runs.size()) ? &runs[static_cast<std::size_t>(id - 1)]
                                                                   : nullptr;
  }
  const MemoryRun* run_of_job(std::int64_t job_id) const {
    for (const MemoryRun& run : runs)
      if (run.job_id == job_id) return &run;
    return nullptr;
  }
};

}  // namespace kw::server::testing
