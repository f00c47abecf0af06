// Ingest of one run report: validate, summarize and judge it (pure), then
// store what was judged and what it sets off, in one transaction of its
// RunStore. What the HTTP layer calls for POST /runs and a job's report; it
// never sees a socket, a request or SQL.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "kw/common/memory_budget.hpp"
#include "kw/common/run_report.hpp"
#include "service/job_service.hpp"
#include "service/run_store.hpp"

namespace kw::server {

// A shard's report taken (kw/common/shards.hpp): its job's run is made
// once every shard's is in.
struct ShardReceipt {
  std::int64_t job_id = 0;  // the job the shard is part of
  std::int64_t index = 1, count = 1;
  std::vector<std::int64_t> waiting_for;  // shards whose reports are not in
  std::string state;                      // the job's
  std::string error;                      // why it failed
};

struct IngestResult {
  std::int64_t run_id = 0;  // 0: a shard's report, no run yet
  std::string verdict;
  bool duplicate = false;  // the same report was stored before; nothing new was written
  std::optional<ShardReceipt> shard;
};

class IngestService {
 public:
  // `max_attempts`: of the profile jobs a regression queues.
  IngestService(RunStore& store, int max_attempts) : store_(store), max_attempts_(max_attempts) {}
  // The memory request bodies share (--body-memory): a shard merge takes its
  // share of it, and waits for the reaper's next pass while it is in use.
  void set_body_memory(common::MemoryBudget* memory) { memory_ = memory; }

  // `document` is the posted report; `job_id` the job it answers, if any.
  // Throws Unprocessable (the contract), NotFound (no project or job),
  // Forbidden (a project the caller's token does not name) or Conflict (a
  // job the agent does not hold, an agent name of another token).
  IngestResult ingest(nlohmann::json document, const Caller& caller, std::optional<std::int64_t> job_id);

  // The run of a job split into shards, from every shard's report, judged
  // once: a second call (the last shard's report racing the lease reaper)
  // answers the run the first made. Shards that do not merge (another GPU
  // model, a case twice) fail the job, with why. Without the memory it
  // needs now, nothing is merged and the shard receipt says so.
  IngestResult merge_shards(std::int64_t job_id);

  // Where an ingest's time goes, summed over every report since start
  // (/metrics: kw_ingest_phase_seconds_total): `parse` the JSON, `validate`
  // the report, `identity` its canonical form (a re-post's match),
  // `summarize` what the rule makes of each case before it is stored
  // (common::summarize_case), as much of it as the identity did not
  // overlap. `plan` (history read and cases judged) runs
  // beside `store` on a second connection; `wait` is what the transaction
  // then still waits for it.
  enum class Phase { parse, validate, identity, summarize, plan, store, wait, finish, after, commit };
  static constexpr std::array<const char*, 10> kPhaseNames = {
      "parse", "validate", "identity", "summarize", "plan", "store", "wait", "finish", "after", "commit"};
  void observe(Phase phase, std::chrono::steady_clock::duration spent) {
    seconds_[static_cast<std::size_t>(phase)] += std::chrono::duration<double>(spent).count();
  }
  double seconds(Phase phase) const { return seconds_[static_cast<std::size_t>(phase)]; }

 private:
  enum class JobCheck { held_by_agent, shards_done };
  IngestResult store_and_judge(nlohmann::json document, common::RunReport report, const Caller* caller,
                               std::optional<std::int64_t> job_id, JobCheck check);
  // The job a report answers must be a measurement of its project and commit
  // that the sender (or, merged, its shards) holds; a retry of a report
  // already stored is answered with that run.
  std::optional<StoredRun> check_job(RunTransaction& tx, std::int64_t project_id,
                                     const common::RunReport& report, const std::string& canonical,
                                     const Caller* caller, std::int64_t job_id, JobCheck check);
  // What a judged run sets off: its job completed, a bisect's next step, the
  // verdict announced, a regression profiled, the cases' heads advanced.
  void after_judged(RunTransaction& tx, const StoredRun& run, std::optional<std::int64_t> job_id) const;
  // A shard's report: kept with its shard, and the run made when it was the
  // last. nullopt: the job is no shard.
  std::optional<IngestResult> take_shard(const nlohmann::json& document, const common::RunReport& report,
                                         const Caller& caller, std::int64_t job_id);

  common::MemoryBudget* memory_ = nullptr;
  RunStore& store_;
  int max_attempts_;
  std::array<std::atomic<double>, kPhaseNames.size()> seconds_{};
};

// The lease reaper's pass (kw-server's runs about every quarter lease):
// expired leases back in the queue or their jobs failed, then the sharded
// jobs whose every shard's report is in but whose run was not made (the
// server stopped between the last report and the merge) merged into it.
struct ReaperPass {
  ExpiredLeases leases;
  std::vector<std::pair<std::int64_t, IngestResult>> merged;  // by job
};
ReaperPass reaper_pass(JobService& jobs, IngestService& ingest);

}  // namespace kw::server
