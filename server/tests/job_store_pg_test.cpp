// The job store's contract on PgJobStore over a test database: the SQL the
// in-memory stand-in stands for.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "job_store_contract.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

std::vector<Statement> queue_statements() {
  std::vector<Statement> statements;
  for (auto part : {TokenRepository::statements(), RunRepository::statements(), JobRepository::statements()})
    statements.insert(statements.end(), part.begin(), part.end());
  return statements;
}

class PgHarness {
 public:
  JobStore& store() { return store_; }

  std::int64_t add_project(const std::string& name, const SettingsChange& change) {
    return with_transaction(pool_, [&](pqxx::work& tx) {
      const std::int64_t id = *RunRepository::create_project(tx, name, "main");
      SettingsRepository::update(tx, id, change);
      return id;
    });
  }

  // Every job last changed `seconds` earlier, as a clock moved on would see it.
  void age_jobs(double seconds) {
    with_transaction(pool_, [&](pqxx::work& tx) {
      tx.exec_params0("UPDATE jobs SET updated_at = updated_at - make_interval(secs => $1)", seconds);
    });
  }

  Caller agent_token(const std::string& name, std::optional<std::vector<std::string>> projects) {
    return with_transaction(pool_, [&](pqxx::work& tx) {
      return *TokenRepository::authenticate(tx, TokenRepository::create(tx, name, Scope::agent, projects));
    });
  }

 private:
  TestDatabase database_;
  ConnectionPool pool_{database_.url(), 2, queue_statements()};
  NotifierOptions notifications_;
  PgJobStore store_{pool_, notifications_};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, JobStoreContract, PgHarness);

// The reaper looks for sharded jobs to merge on every pass: with 1,266 jobs
// of 64 shards queued (82,290 rows, 100,000 with the others) it took 13.3 s a
// pass, a scan of the table once a job. Through the indexes it takes
// milliseconds; the bound here is loose, the figure is printed for
// docs/PERFORMANCE.md.
TEST(JobRepositoryScale, TheReapersLookForMergesStaysFastOverAHundredThousandJobs) {
  TestDatabase database;
  ConnectionPool pool{database.url(), 1, queue_statements()};
  with_transaction(pool, [](pqxx::work& tx) {
    const std::int64_t project = *RunRepository::create_project(tx, "demo", "main");
    tx.exec_params0(
        "INSERT INTO jobs (project_id, commit_sha, branch, gpu_class, kind, state, shards) "
        "SELECT $1, md5('sharded' || k) || '00000000', 'pr', 'any', 'measure', 'running', 64 "
        "FROM generate_series(1, 1266) k",
        project);
    tx.exec_params0(
        "INSERT INTO jobs (project_id, commit_sha, branch, gpu_class, kind, parent_job_id, shard_index) "
        "SELECT p.project_id, p.commit_sha, 'pr', 'any', 'shard', p.id, k FROM jobs p, generate_series(1, "
        "64) k "
        "WHERE p.kind = 'measure'");
    tx.exec_params0(
        "INSERT INTO jobs (project_id, commit_sha, branch, gpu_class, state) "
        "SELECT $1, md5('done' || k) || '00000000', 'main', 'any', 'done' FROM generate_series(1, 100000 - "
        "82290) k",
        project);
    tx.exec0("ANALYZE jobs");
  });
  std::vector<double> passes;
  for (int pass = 0; pass < 5; ++pass) {
    const auto started = std::chrono::steady_clock::now();
    const auto pending =
        with_transaction(pool, [](pqxx::work& tx) { return JobRepository::merge_pending(tx); });
    passes.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    EXPECT_TRUE(pending.empty());
  }
  std::sort(passes.begin(), passes.end());
  std::printf("merge_pending over 100,000 jobs (1,266 of 64 shards): median %.2f ms of 5 passes\n",
              passes[2]);
  EXPECT_LT(passes[2], 1000.0) << "a scan of the table once a job";
}

}  // namespace
}  // namespace kw::server::testing
