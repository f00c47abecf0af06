// What BisectService reads and writes: a push's bisects, one transaction at
// a time, as facts (model/bisects.hpp); the rules that move a bisect are
// BisectService's alone. kw-server keeps them in PostgreSQL (PgBisectStore,
// over BisectRepository); the rules are also tested on the in-memory
// stand-in, and both pass one contract (server/tests/bisect_store_contract.hpp).
// A judged run and a failed job reach the same port through the run's and
// the job's transactions (RunTransaction::bisects, JobTransaction::bisects).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "model/bisects.hpp"
#include "model/jobs.hpp"

namespace kw::server {

class BisectTransaction {
 public:
  virtual ~BisectTransaction() = default;
  // The project's name; nullopt: no such bisect.
  virtual std::optional<std::string> project_of(std::int64_t bisect_id) = 0;
  // What GET /api/v1/bisects/{id} shows.
  virtual std::optional<BisectView> view(std::int64_t bisect_id) = 0;

  // The job's and its judged run's facts.
  virtual BisectRunFacts run_facts(std::int64_t job_id, std::int64_t run_id) = 0;
  // The bisect and commit of a step job; nullopt: the job is no step.
  virtual std::optional<BisectStepJob> step_job(std::int64_t job_id) = 0;
  // The bisect, held against concurrent changes until the transaction ends.
  virtual std::optional<Bisect> load(std::int64_t bisect_id) = 0;
  // A new bisect of the run's regression (its id; nullopt: the run has one already).
  virtual std::optional<std::int64_t> create(const Bisect& bisect, std::int64_t run_id) = 0;
  // Writes its bounds, skips, steps, state, message and first bad commit.
  virtual void save(const Bisect& bisect) = 0;
  virtual std::string default_branch(std::int64_t project_id) = 0;
  virtual void queue_step(const NewJob& job) = 0;
  // Its steps still queued, cancelled with the reason.
  virtual void cancel_queued_steps(std::int64_t bisect_id, const std::string& reason) = 0;
};

class BisectStore {
 public:
  using Transaction = BisectTransaction;
  virtual ~BisectStore() = default;
  virtual void transact(const std::function<void(BisectTransaction&)>& work) = 0;
};

}  // namespace kw::server
