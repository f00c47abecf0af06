// Bisects in PostgreSQL: the rows behind BisectTransaction
// (service/bisect_store.hpp); the rules that move a bisect are
// BisectService's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "model/bisects.hpp"
#include "model/jobs.hpp"

namespace kw::server {

class BisectRepository {
 public:
  static BisectRunFacts run_facts(pqxx::work& tx, std::int64_t job_id, std::int64_t run_id);
  static std::optional<BisectStepJob> step_job(pqxx::work& tx, std::int64_t job_id);
  // FOR UPDATE: a step's run and a cancel wait for each other.
  static std::optional<Bisect> load(pqxx::work& tx, std::int64_t bisect_id);
  static std::optional<std::int64_t> create(pqxx::work& tx, const Bisect& bisect, std::int64_t run_id);
  static void save(pqxx::work& tx, const Bisect& bisect);
  static std::string default_branch(pqxx::work& tx, std::int64_t project_id);
  static void queue_step(pqxx::work& tx, const NewJob& job);
  static void cancel_queued_steps(pqxx::work& tx, std::int64_t bisect_id, const std::string& reason);
  static std::optional<BisectView> view(pqxx::work& tx, std::int64_t bisect_id);
  static std::optional<std::string> project_of(pqxx::work& tx, std::int64_t bisect_id);
};

}  // namespace kw::server
