#include "store/pg_bisect_store.hpp"

#include "store/bisect_repository.hpp"

namespace kw::server {

std::optional<std::string> PgBisectTransaction::project_of(std::int64_t bisect_id) {
  return BisectRepository::project_of(tx_, bisect_id);
}
std::optional<BisectView> PgBisectTransaction::view(std::int64_t bisect_id) {
  return BisectRepository::view(tx_, bisect_id);
}
BisectRunFacts PgBisectTransaction::run_facts(std::int64_t job_id, std::int64_t run_id) {
  return BisectRepository::run_facts(tx_, job_id, run_id);
}
std::optional<BisectStepJob> PgBisectTransaction::step_job(std::int64_t job_id) {
  return BisectRepository::step_job(tx_, job_id);
}
std::optional<Bisect> PgBisectTransaction::load(std::int64_t bisect_id) {
  return BisectRepository::load(tx_, bisect_id);
}
std::optional<std::int64_t> PgBisectTransaction::create(const Bisect& bisect, std::int64_t run_id) {
  return BisectRepository::create(tx_, bisect, run_id);
}
void PgBisectTransaction::save(const Bisect& bisect) {
  BisectRepository::save(tx_, bisect);
}
std::string PgBisectTransaction::default_branch(std::int64_t project_id) {
  return BisectRepository::default_branch(tx_, project_id);
}
void PgBisectTransaction::queue_step(const NewJob& job) {
  BisectRepository::queue_step(tx_, job);
}
void PgBisectTransaction::cancel_queued_steps(std::int64_t bisect_id, const std::string& reason) {
  BisectRepository::cancel_queued_steps(tx_, bisect_id, reason);
}

void PgBisectStore::transact(const std::function<void(BisectTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgBisectTransaction bisects(tx);
    work(bisects);
  });
}

}  // namespace kw::server
