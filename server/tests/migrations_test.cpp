#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kw/common/detection.hpp"
#include "kw/schema/migrations.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

// One completed main run of the (only) project, as older schemas stored it.
// rule_version: nullopt leaves the column out (before 035 it had none).
void insert_one_run(pqxx::transaction_base& tx, const std::string& report_sha256 = "x",
                    std::optional<int> rule_version = std::nullopt) {
  tx.exec_params(
      "INSERT INTO runs (project_id, commit_sha, branch, agent_name, agent_version, gpu_model, started_at, "
      "finished_at, gpu_seconds, report_sha256, verdict" +
          std::string(rule_version ? ", rule_version" : "") +
          ") "
          "SELECT id, repeat('a', 40), 'main', 'host', '1', 'NVIDIA H100', now(), now(), 1, $1, 'pass'" +
          (rule_version ? ", " + std::to_string(*rule_version) : std::string()) + " FROM projects",
      report_sha256);
}

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

// 006 copies the locations of runs stored before it into run_locations, so
// detection's history does not start again from nothing on upgrade.
TEST(Migrations, RunLocationsAreFilledFromRunsStoredBefore) {
  TestDatabase database(5);
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    // The database as it was at version 5, with one run of three cases (one without a candidate).
    tx.exec("INSERT INTO projects (name) VALUES ('demo')");
    insert_one_run(tx);
    tx.exec(
        "INSERT INTO cases (run_id, project_id, ordinal, name, params, candidate_location_ns) "
        "SELECT r.id, r.project_id, c.ordinal, c.name, '{}', c.location FROM runs r, "
        "(VALUES (1, 'b', 200.5), (0, 'a', 100.25), (2, 'c', NULL)) AS c(ordinal, name, location)");
    tx.commit();
  }
  EXPECT_EQ(apply_migrations(connection), schema::kLatestVersion);
  pqxx::work tx(connection);
  pqxx::row row = tx.exec1("SELECT case_names::text, locations::text FROM run_locations");
  EXPECT_EQ(row[0].as<std::string>(), "{a,b}");
  EXPECT_EQ(row[1].as<std::string>(), "{100.25,200.5}");
}

// 007: rows stored before replicates keep working: their samples are one
// replicate (NULL replicate indices and spreads), on the head side, and every
// project gets the default false-alarm rate in place of history_z.
TEST(Migrations, ReplicatesLeaveOlderRowsAsOneReplicate) {
  TestDatabase database(6);
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    tx.exec("INSERT INTO projects (name, history_z) VALUES ('demo', 5)");
    insert_one_run(tx);
    tx.exec(
        "INSERT INTO cases (run_id, project_id, ordinal, name, params, candidate_location_ns) "
        "SELECT id, project_id, 0, 'a', '{}', 100 FROM runs");
    tx.exec(
        "INSERT INTO measurements (case_id, impl, samples_ns, median_ns) SELECT id, 'candidate', '{100}', "
        "100 FROM cases");
    tx.exec("INSERT INTO run_locations SELECT id, '{a}', '{100}' FROM runs");
    tx.commit();
  }
  EXPECT_EQ(apply_migrations(connection), schema::kLatestVersion);
  pqxx::work tx(connection);
  pqxx::row m = tx.exec1(
      "SELECT m.side, s.replicates IS NULL FROM measurements m JOIN samples s USING (case_id, side, impl)");
  EXPECT_EQ(m[0].as<std::string>(), "head");
  EXPECT_TRUE(m[1].as<bool>());
  pqxx::row l = tx.exec1("SELECT replicate_counts IS NULL, replicate_sds IS NULL FROM run_locations");
  EXPECT_TRUE(l[0].as<bool>());
  EXPECT_TRUE(l[1].as<bool>());
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT run_alpha FROM projects")[0].as<double>(), 0.01);
  // The same implementation may now be stored for both sides of an A/B.
  tx.exec(
      "INSERT INTO measurements (case_id, side, impl, median_ns) "
      "SELECT id, 'base', 'candidate', 101 FROM cases");
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM measurements")[0].as<int>(), 2);
}

// 027 moves every measurement's raw arrays into `samples`, in the partition
// of the month its run was stored in; the summaries stay.
TEST(Migrations, SamplesMoveIntoTheMonthTheirRunWasStoredIn) {
  TestDatabase database(26);
  pqxx::connection connection(database.url());
  {
    pqxx::work tx(connection);
    tx.exec("INSERT INTO projects (name) VALUES ('demo')");
    insert_one_run(tx);
    tx.exec("UPDATE runs SET created_at = '2025-03-10 12:00+00'");
    tx.exec(
        "INSERT INTO cases (run_id, project_id, ordinal, name, params) SELECT id, project_id, 0, 'a', '{}' "
        "FROM runs");
    tx.exec(
        "INSERT INTO measurements (case_id, side, impl, samples_ns, median_ns, throttled_samples, "
        "replicates, "
        "sm_mhz) SELECT id, 'head', 'candidate', '{100,101.5}', 100.75, '{1}', '{0,1}', '{1980,1755}' FROM "
        "cases");
    tx.commit();
  }
  EXPECT_EQ(apply_migrations(connection), schema::kLatestVersion);
  pqxx::work tx(connection);
  pqxx::row s = tx.exec1(
      "SELECT stored_on::text, samples_ns::text, throttled_samples::text, replicates::text, sm_mhz::text, "
      "tableoid::regclass::text FROM samples");
  EXPECT_EQ(s[0].as<std::string>(), "2025-03-10");
  EXPECT_EQ(s[1].as<std::string>(), "{100,101.5}");
  EXPECT_EQ(s[2].as<std::string>(), "{1}");
  EXPECT_EQ(s[3].as<std::string>(), "{0,1}");
  EXPECT_EQ(s[4].as<std::string>(), "{1980,1755}");
  EXPECT_EQ(s[5].as<std::string>(), "samples_2025_03");
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT median_ns FROM measurements")[0].as<double>(), 100.75);
  // This month's partition and the next exist, so an ingest finds its month.
  EXPECT_EQ(
      tx.exec1("SELECT count(*) FROM pg_class WHERE relname IN ('samples_' || to_char(now(), 'YYYY_MM'), "
               "'samples_' || to_char(now() + interval '1 month', 'YYYY_MM'))")[0]
          .as<int>(),
      2);
}

// Replicas starting together on an empty database all come up: the
// migration lock is taken before the first CREATE TABLE.
TEST(Migrations, FourServersMigratingAnEmptyDatabaseTogetherAllSucceed) {
  for (int round = 0; round < 10; ++round) {
    TestDatabase database(0);
    {
      pqxx::connection connection(database.url());
      pqxx::work tx(connection);
      tx.exec("DROP TABLE schema_migrations");
      tx.commit();
    }
    std::vector<std::unique_ptr<pqxx::connection>> connections;  // pqxx 6 connections do not move
    for (int i = 0; i < 4; ++i) connections.push_back(std::make_unique<pqxx::connection>(database.url()));
    std::atomic<int> ready{0};
    std::vector<std::string> errors(4);
    std::vector<std::thread> servers;
    for (int i = 0; i < 4; ++i) {
      servers.emplace_back([&, i] {
        ++ready;
        while (ready < 4) std::this_thread::yield();
        try {
          apply_migrations(*connections[static_cast<std::size_t>(i)]);
        } catch (const std::exception& error) {
          errors[static_cast<std::size_t>(i)] = error.what();
        }
      });
    }
    for (std::thread& server : servers) server.join();
    for (const std::string& error : errors) EXPECT_EQ(error, "") << "round " << round;
    pqxx::work tx(*connections[0]);
    EXPECT_EQ(tx.exec("SELECT count(*) FROM schema_migrations")[0][0].as<std::size_t>(),
              schema::kMigrations.size());
  }
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

// A project's detection settings start at the rule's defaults, which
// kw/common/detection.hpp alone defines: the schema's column defaults and
// run_alpha's bound must say the same.
TEST(Migrations, TheSchemasDetectionDefaultsAreTheRulesDefaults) {
  TestDatabase database;
  pqxx::connection connection(database.url());
  pqxx::work tx(connection);
  auto column_default = [&](const char* column) {
    return tx
        .exec_params1(
            "SELECT column_default::float8 FROM information_schema.columns "
            "WHERE table_name = 'projects' AND column_name = $1",
            column)[0]
        .as<double>();
  };
  const common::DetectionSettings rule;
  EXPECT_EQ(column_default("min_threshold"), rule.min_threshold);
  EXPECT_EQ(column_default("run_alpha"), rule.run_alpha);
  EXPECT_EQ(column_default("energy_threshold"), rule.energy_threshold);
  // The largest run_alpha the table takes is the largest the settings route takes.
  tx.exec("INSERT INTO projects (name) VALUES ('bounds')");
  tx.exec_params0("UPDATE projects SET run_alpha = $1 WHERE name = 'bounds'", rule.kMaxRunAlpha);
  pqxx::subtransaction over(tx, "over");
  EXPECT_THROW(over.exec_params0("UPDATE projects SET run_alpha = $1 WHERE name = 'bounds'",
                                 std::nextafter(rule.kMaxRunAlpha, 1.0)),
               pqxx::check_violation);
}

// Runs stored before 035 were computed with the first rule. Rules 2 and 3
// changed only A/B comparisons: a run without one moves to the newest
// (036, 037), a run judged A/B keeps the rule it was judged by (1 before
// 035, 2 after). A run stored after names its version (the column has no
// default to fall back on).
TEST(Migrations, RunsStoredBeforeTheRuleVersionKeepTheRuleTheirComparisonsWereComputedWith) {
  TestDatabase database(34);
  pqxx::connection connection(database.url());
  auto judge_the_newest_run_ab = [](pqxx::work& tx) {
    tx.exec(
        "INSERT INTO comparisons (run_id, case_name, kind, impl, baseline_reason, status, method) "
        "SELECT max(id), 'a', 'time', 'candidate', 'base measured in the same job', 'unchanged', 'ab' FROM "
        "runs");
  };
  {
    pqxx::work tx(connection);
    tx.exec("INSERT INTO projects (name) VALUES ('demo')");
    insert_one_run(tx);
    insert_one_run(tx, "y");
    judge_the_newest_run_ab(tx);
    tx.commit();
  }
  ASSERT_EQ(apply_migrations(connection, 36), 36);
  {
    pqxx::work tx(connection);
    insert_one_run(tx, "z", 2);
    judge_the_newest_run_ab(tx);
    tx.commit();
  }
  EXPECT_EQ(apply_migrations(connection), schema::kLatestVersion);
  pqxx::work tx(connection);
  pqxx::result versions = tx.exec("SELECT rule_version FROM runs ORDER BY id");
  ASSERT_EQ(versions.size(), 3u);
  EXPECT_EQ(versions[0][0].as<int>(), 3);
  EXPECT_EQ(versions[1][0].as<int>(), 1);
  EXPECT_EQ(versions[2][0].as<int>(), 2);
  pqxx::subtransaction unnamed(tx, "unnamed");
  EXPECT_THROW(insert_one_run(unnamed), pqxx::not_null_violation);
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
