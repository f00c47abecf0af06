// The in-memory stand-in's bisects (in_memory_store.hpp): the facts
// BisectService's rules read and write, over the state's jobs and runs.
// Held to PgBisectTransaction by bisect_store_contract.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>

#include "in_memory_state.hpp"
#include "service/bisect_store.hpp"
#include "service/job_store.hpp"

namespace kw::server::testing {

class InMemoryBisects final : public BisectTransaction {
 public:
  InMemoryBisects(MemoryState& state, JobTransaction& queue) : s_(state), queue_(queue) {}

  std::optional<std::string> project_of(std::int64_t bisect_id) override {
    const MemoryBisect* b = find(bisect_id);
    if (!b) return std::nullopt;
    return s_.project(b->bisect.project_id).name;
  }

  std::optional<BisectView> view(std::int64_t bisect_id) override {
    const MemoryBisect* b = find(bisect_id);
    if (!b) return std::nullopt;
    BisectView view{b->bisect, s_.project(b->bisect.project_id).name, b->run_id, b->created_at, b->updated_at,
                    {}};
    for (const MemoryJob& job : s_.jobs) {
      if (job.asked.bisect_id != bisect_id) continue;
      BisectStepRow step{job.id,       job.asked.commit, job.state, job.asked.base_commit,
                         std::nullopt, std::nullopt};
      if (const MemoryRun* run = s_.run_of_job(job.id)) {
        step.run_id = run->id;
        step.verdict = run->verdict;
      }
      view.steps.push_back(step);
    }
    return view;
  }

  BisectRunFacts run_facts(std::int64_t job_id, std::int64_t run_id) override {
    const MemoryJob& job = *s_.job(job_id);
    const MemoryRun& run = *s_.run(run_id);
    BisectRunFacts facts;
    facts.bisect_id = job.asked.bisect_id;
    facts.on_default_branch = job.on_default_branch;
    facts.range = job.asked.range;
    facts.gpu_class = job.asked.gpu_class;
    facts.project_id = job.asked.project_id;
    facts.commit = run.report().commit;
    facts.verdict = run.verdict;
    for (const common::Stage& stage : run.report().stages)
      facts.build_failed |=
          stage.name == common::StageName::build && stage.status == common::StageStatus::failed;
    if (run.comparisons)
      for (const nlohmann::json& row : *run.comparisons)
        if (row["kind"] == "time" && row["impl"] == "candidate" && row["status"] == "regression")
          facts.regressed.push_back(row["case"]);
    std::sort(facts.regressed.begin(), facts.regressed.end());
    return facts;
  }

  std::optional<BisectStepJob> step_job(std::int64_t job_id) override {
    const MemoryJob& job = *s_.job(job_id);
    if (!job.asked.bisect_id) return std::nullopt;
    return BisectStepJob{*job.asked.bisect_id, job.asked.commit};
  }

  std::optional<Bisect> load(std::int64_t bisect_id) override {
    const MemoryBisect* b = find(bisect_id);
    if (!b) return std::nullopt;
    return b->bisect;
  }

  std::optional<std::int64_t> create(const Bisect& bisect, std::int64_t run_id) override {
    for (const MemoryBisect& b : s_.bisects)
      if (b.run_id == run_id) return std::nullopt;
    MemoryBisect made{bisect, run_id, now(), now()};
    made.bisect.id = static_cast<std::int64_t>(s_.bisects.size()) + 1;
    made.bisect.state = "running";
    made.bisect.steps = 0;
    s_.bisects.push_back(made);
    return made.bisect.id;
  }

  void save(const Bisect& bisect) override {
    MemoryBisect& b = *find(bisect.id);
    b.bisect = bisect;
    b.updated_at = now();
  }

  std::string default_branch(std::int64_t project_id) override {
    return s_.project(project_id).default_branch;
  }

  void queue_step(const NewJob& job) override { queue_.create(job); }

  void cancel_queued_steps(std::int64_t bisect_id, const std::string& reason) override {
    for (MemoryJob& job : s_.jobs) {
      if (job.asked.bisect_id != bisect_id || job.state != "queued") continue;
      job.state = "cancelled";
      job.error = reason;
    }
  }

 private:
  MemoryBisect* find(std::int64_t id) {
    return id >= 1 && id <= static_cast<std::int64_t>(s_.bisects.size())
               ? &s_.bisects[static_cast<std::size_t>(id - 1)]
               : nullptr;
  }
  // What the API writes for a time (ISO 8601, UTC).
  static std::string now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    gmtime_r(&t, &utc);
    char text[32];
    std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S+00:00", &utc);
    return text;
  }

  MemoryState& s_;
  JobTransaction& queue_;
};

}  // namespace kw::server::testing
