// PgBisectStore: the bisect store in PostgreSQL (service/bisect_store.hpp
// says what it holds). PgBisectTransaction also serves the run's and the
// job's transactions, over their pqxx::work.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "service/bisect_store.hpp"
#include "store/database.hpp"

namespace kw::server {

class PgBisectTransaction final : public BisectTransaction {
 public:
  explicit PgBisectTransaction(pqxx::work& tx) : tx_(tx) {}

  std::optional<std::string> project_of(std::int64_t bisect_id) override;
  std::optional<BisectView> view(std::int64_t bisect_id) override;
  BisectRunFacts run_facts(std::int64_t job_id, std::int64_t run_id) override;
  std::optional<BisectStepJob> step_job(std::int64_t job_id) override;
  std::optional<Bisect> load(std::int64_t bisect_id) override;
  std::optional<std::int64_t> create(const Bisect& bisect, std::int64_t run_id) override;
  void save(const Bisect& bisect) override;
  std::string default_branch(std::int64_t project_id) override;
  void queue_step(const NewJob& job) override;
  void cancel_queued_steps(std::int64_t bisect_id, const std::string& reason) override;

 private:
  pqxx::work& tx_;
};

class PgBisectStore final : public BisectStore {
 public:
  explicit PgBisectStore(ConnectionPool& pool) : pool_(pool) {}
  // Retried whole on a serialization failure or a lost connection (with_transaction).
  void transact(const std::function<void(BisectTransaction&)>& work) override;

 private:
  ConnectionPool& pool_;
};

}  // namespace kw::server
