// History reads served by a streaming replica: a real primary and a hot
// standby fed by streaming replication (both started here, the standby from
// pg_basebackup), two kw-servers on them. Replay is paused on the standby to
// make it lag by as much as a test needs: the reads that must see a write go
// to the primary, the others stay on the replica.
#include <gtest/gtest.h>

#include <chrono>

#include "../../tests/support/report_factory.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "server_fixture.hpp"
#include "store/read_routing.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

TEST(ParseLsnTest, ReadsPostgresWalPositions) {
  EXPECT_EQ(parse_lsn("0/0"), 0u);
  EXPECT_EQ(parse_lsn("16/B374D848"), (std::uint64_t{0x16} << 32) | 0xB374D848u);
  EXPECT_GT(parse_lsn("1/0"), parse_lsn("0/FFFFFFFF"));
  for (const char* bad : {"", "16", "/1", "1/", "x/1", "1/2/3", "1/ 2", "100000000/0"})
    EXPECT_THROW(parse_lsn(bad), std::invalid_argument) << bad;
}

class ReplicaReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    primary_dir_ = kw::testing::make_temp_dir("kw-replica-test-primary");
    standby_dir_ = kw::testing::make_temp_dir("kw-replica-test-standby");
    primary_ = std::make_unique<EmbeddedPostgres>(primary_dir_);
    primary_->start();
    standby_ = std::make_unique<EmbeddedPostgres>(standby_dir_);
    standby_->make_standby_of(*primary_);
    standby_->start();
    writer_ = start_server();
    other_ = start_server();
    create_project(primary_url(), "demo");
    create_project(primary_url(), "other");
    agent_token_ = create_token(primary_url(), "agent-1", Scope::agent);
    for (auto* server : {writer_.get(), other_.get()})
      wait_for([&] { return metric(*server, "kw_read_cache_listening") == 1; }, "the change feeds to listen");
    wait_for_replay();
  }

  void TearDown() override {
    writer_.reset();
    other_.reset();
    standby_.reset();
    primary_.reset();
    std::error_code ignored;
    for (const auto& dir : {primary_dir_, standby_dir_}) std::filesystem::remove_all(dir, ignored);
  }

  std::string primary_url() const { return primary_->url(); }

  std::unique_ptr<App> start_server() {
    ServerOptions options;
    options.http.port = 0;
    options.http.threads = 2;
    options.database_url = primary_url();
    options.read_database_url = standby_->url();
    auto app = std::make_unique<App>(options);
    app->start();
    return app;
  }

  static std::string base(App& app) { return "http://127.0.0.1:" + std::to_string(app.port()); }
  http::Response get(App& app, const std::string& path) {
    auto response = http::Client(base(app)).get(path);
    EXPECT_EQ(response.status, 200) << path << ": " << response.body;
    return response;
  }

  int post(App& app, std::uint64_t seed) {
    ReportSpec spec;
    spec.seed = seed;
    spec.commit = make_commit(seed);
    auto response = http::Client(base(app), agent_token_).post("/api/v1/runs", make_report(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["run_id"].get<int>();
  }

  // demo's runs list: read uncached, so each one counts where it ran.
  std::size_t runs(App& app, const std::string& project = "demo") {
    return get(app, "/api/v1/projects/" + project + "/runs").json().size();
  }
  std::size_t series_points(App& app) {
    const json answer =
        get(app, "/api/v1/projects/demo/series?case=" + http::url_encode("attention.fwd/case0")).json();
    return answer["run_id"].size();
  }

  double metric(App& app, const std::string& name) {
    return metric_value(http::Client(base(app)).get("/metrics").body, name);
  }
  double replica_reads(App& app) { return metric(app, "kw_history_reads_total{database=\"replica\"}"); }
  double primary_reads(App& app) { return metric(app, "kw_history_reads_total{database=\"primary\"}"); }

  // The first value `query` answers on that database ("" for none or NULL).
  static std::string first_value(const std::string& url, const std::string& query) {
    pqxx::connection connection(url);
    pqxx::nontransaction tx(connection);
    const pqxx::result result = tx.exec(query);
    return result.empty() || result[0][0].is_null() ? std::string() : result[0][0].as<std::string>();
  }
  std::string on_standby(const std::string& query) { return first_value(standby_->url(), query); }
  std::string on_primary(const std::string& query) { return first_value(primary_url(), query); }

  void pause_replay() {
    on_standby("SELECT pg_wal_replay_pause()");
    wait_for([&] { return on_standby("SELECT pg_get_wal_replay_pause_state()") == "paused"; },
             "replay to pause");
  }
  void resume_replay() {
    on_standby("SELECT pg_wal_replay_resume()");
    wait_for_replay();
  }
  // Until the standby has replayed everything the primary has written.
  void wait_for_replay() {
    const std::uint64_t target = parse_lsn(on_primary("SELECT pg_current_wal_insert_lsn()::text"));
    wait_for([&] { return parse_lsn(on_standby("SELECT pg_last_wal_replay_lsn()::text")) >= target; },
             "the standby to replay the primary's WAL");
  }

  template <typename Condition>
  void wait_for(Condition condition, const std::string& what) {
    wait_until(condition, what, std::chrono::seconds(10));
  }

  std::filesystem::path primary_dir_, standby_dir_;
  std::unique_ptr<EmbeddedPostgres> primary_, standby_;
  std::unique_ptr<App> writer_, other_;
  std::string agent_token_;
};

TEST_F(ReplicaReadsTest, ReadsAreServedByTheReplica) {
  pause_replay();
  // A project made behind kw-server's back: no server knows of this write,
  // so a read that shows it came from the primary.
  on_primary("INSERT INTO projects (name, default_branch) VALUES ('unseen', 'main')");
  const double before = replica_reads(*writer_);
  auto names = [&](App& app) {
    std::vector<std::string> found;
    const json projects = get(app, "/api/v1/projects").json();
    for (const json& project : projects) found.push_back(project["name"].get<std::string>());
    return found;
  };
  EXPECT_EQ(names(*writer_), (std::vector<std::string>{"demo", "other"}));
  EXPECT_EQ(replica_reads(*writer_), before + 1);
  resume_replay();
  EXPECT_EQ(names(*writer_), (std::vector<std::string>{"demo", "other", "unseen"}));
  EXPECT_EQ(replica_reads(*writer_), before + 2);
}

TEST_F(ReplicaReadsTest, AWriteIsReadFromThePrimaryUntilTheReplicaHasIt) {
  post(*writer_, 1);
  wait_for_replay();
  double replica_before = replica_reads(*writer_);
  EXPECT_EQ(runs(*writer_), 1u);
  EXPECT_EQ(replica_reads(*writer_), replica_before + 1) << "the replica has the run: it serves the read";

  pause_replay();
  const int second = post(*writer_, 2);
  // The server that took the run: at once, from the primary.
  const double primary_before = primary_reads(*writer_);
  EXPECT_EQ(runs(*writer_), 2u);
  EXPECT_EQ(series_points(*writer_), 2u);
  EXPECT_EQ(get(*writer_, "/api/v1/projects/demo/overview").json()["cases"][0]["run_id"], second);
  EXPECT_EQ(primary_reads(*writer_), primary_before + 3);
  // Another project's reads stay on the lagging replica.
  replica_before = replica_reads(*writer_);
  EXPECT_EQ(runs(*writer_, "other"), 0u);
  EXPECT_EQ(replica_reads(*writer_), replica_before + 1);

  // The other server: once its change feed has heard the commit; from then
  // on every read sees it, the cached ones too, though the replica still
  // has not replayed it.
  wait_for([&] { return series_points(*other_) == 2u; }, "the other server to serve the run");
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(series_points(*other_), 2u);
    EXPECT_EQ(runs(*other_), 2u);
  }
  EXPECT_EQ(on_standby("SELECT count(*) FROM runs"), "1") << "the standby was still behind";

  // Replayed: the replica serves demo again.
  resume_replay();
  replica_before = replica_reads(*other_);
  EXPECT_EQ(runs(*other_), 2u);
  EXPECT_EQ(replica_reads(*other_), replica_before + 1);
}

TEST_F(ReplicaReadsTest, AStoppedReplicaHandsItsReadsToThePrimary) {
  post(*writer_, 1);
  wait_for_replay();
  standby_->stop();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(runs(*writer_), 1u);
  wait_for([&] { return metric(*writer_, "kw_replica_up") == 0; }, "the replica to be seen down");
  const double primary_before = primary_reads(*writer_);
  EXPECT_EQ(runs(*writer_), 1u);
  EXPECT_EQ(primary_reads(*writer_), primary_before + 1);
}

}  // namespace
}  // namespace kw::server::testing
