// The job store's contract on PgJobStore over a test database: the SQL the
// in-memory stand-in stands for.
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

}  // namespace
}  // namespace kw::server::testing
