#include <gtest/gtest.h>

#include "kw/schema/migrations.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

TEST(Migrations, FromEmptyThenReappliedIsANoOp) {
  // TestDatabase applies them from empty.
  TestDatabase database;
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    pqxx::result versions = tx.exec("SELECT version, name FROM schema_migrations ORDER BY version");
    ASSERT_EQ(versions.size(), schema::kMigrations.size());
    EXPECT_EQ(versions[0][1].as<std::string>(), "001_initial");
    for (const char* table : {"projects", "api_tokens", "agents", "jobs", "runs", "stages", "cases",
                              "launches", "measurements"}) {
      EXPECT_EQ(tx.exec_params("SELECT to_regclass($1) IS NOT NULL", table)[0][0].as<bool>(), true) << table;
    }
  }
  EXPECT_EQ(apply_migrations(connection), schema::kLatestVersion);
  pqxx::work tx(connection);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM schema_migrations")[0][0].as<std::size_t>(),
            schema::kMigrations.size());
}

TEST(Migrations, AFailingMigrationLeavesNothingBehind) {
  TestDatabase database;
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    tx.exec("DELETE FROM schema_migrations");  // pretend nothing was applied: re-running 001 must fail
    tx.commit();
  }
  EXPECT_THROW(apply_migrations(connection), pqxx::sql_error);
  pqxx::work tx(connection);
  EXPECT_EQ(tx.exec("SELECT count(*) FROM schema_migrations")[0][0].as<int>(), 0);
}

TEST(Migrations, RefusesANewerDatabase) {
  TestDatabase database;
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    tx.exec("INSERT INTO schema_migrations (version, name) VALUES (999, 'future')");
    tx.commit();
  }
  try {
    apply_migrations(connection);
    FAIL() << "accepted a newer schema";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("schema is at version 999"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace kw::server::testing
