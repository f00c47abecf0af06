// The read cache of series and overview answers: a write is seen by the next
// read, whichever path, replica or plain SQL made it; a cache that cannot
// hear changes serves nothing.
#include <gtest/gtest.h>

#include <chrono>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"
#include "service/read_cache.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class ReadCacheTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    create_project("other");
    wait_for([&] { return metric("kw_read_cache_listening") == 1; }, "the change feed to listen");
  }
  int post(const std::string& project, std::uint64_t seed, const std::string& branch = "main") {
    ReportSpec spec;
    spec.project = project;
    spec.seed = seed;
    spec.branch = branch;
    spec.commit = make_commit(seed);
    auto response = agent().post("/api/v1/runs", make_report(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["run_id"].get<int>();
  }
  static std::string series_of(const std::string& project) {
    return "/api/v1/projects/" + project + "/series?case=" + http::url_encode("attention.fwd/case0");
  }
  std::size_t points(const std::string& project) {
    auto response = client().get(series_of(project));
    EXPECT_EQ(response.status, 200) << response.body;
    return response.json()["run_id"].size();
  }
  double metric(const std::string& name) { return metric_value(client().get("/metrics").body, name); }
  double hits() { return metric("kw_read_cache_requests_total{outcome=\"hit\"}"); }
  // Changes from elsewhere arrive by notification, within milliseconds.
  template <typename Condition>
  void wait_for(Condition condition, const std::string& what) {
    wait_until(condition, what);
  }
};

TEST_F(ReadCacheTest, ARepeatedReadIsCachedAndAWriteIsSeenByTheNextRead) {
  post("demo", 1);
  post("other", 2);
  EXPECT_EQ(points("demo"), 1u);
  EXPECT_EQ(points("other"), 1u);
  // The posts' own notifications may arrive after these reads and drop
  // their answers (correctly, if late): wait until both projects' answers
  // stay cached, so the counts below see only what the test does.
  for (const char* project : {"demo", "other"}) {
    wait_for(
        [&] {
          const double hits_before = hits();
          points(project);
          return hits() == hits_before + 1;
        },
        std::string(project) + "'s answer to stay cached");
  }
  const double before = hits();
  EXPECT_EQ(points("demo"), 1u);
  EXPECT_EQ(hits(), before + 1);

  post("demo", 3);
  EXPECT_EQ(points("demo"), 2u) << "the poster's next read sees its run";
  const double after = hits();
  EXPECT_EQ(points("other"), 1u);
  EXPECT_EQ(hits(), after + 1) << "a write of demo keeps other's answers";

  // The overview is cached the same way.
  auto overview = [&] { return client().get("/api/v1/projects/demo/overview").json()["cases"][0]["run_id"]; };
  const json newest = overview();
  EXPECT_EQ(overview(), newest);
  const int run = post("demo", 4);
  EXPECT_EQ(overview(), run);
}

TEST_F(ReadCacheTest, AnAcknowledgementIsSeenByTheNextRead) {
  ReportSpec spec;
  post("demo", 1);
  spec.seed = 2;
  spec.commit = make_commit(2);
  spec.slowdown = 1.5;
  auto regressed = agent().post("/api/v1/runs", make_report(spec)).json();
  ASSERT_EQ(regressed["verdict"], "regression");
  auto acknowledged = [&] { return client().get(series_of("demo")).json()["acknowledged"][1].get<bool>(); };
  EXPECT_FALSE(acknowledged());
  EXPECT_FALSE(acknowledged());
  auto ack = ci().post("/api/v1/runs/" + std::to_string(regressed["run_id"].get<int>()) + "/acknowledge",
                       {{"reason", "intended"}});
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_TRUE(acknowledged());
}

TEST_F(ReadCacheTest, WritesOfAnotherReplicaAndOfPlainSqlReachTheCache) {
  ServerOptions options = server_options();
  options.database_url = database_->url();
  App replica(options);
  replica.start();
  http::Client replica_agent("http://127.0.0.1:" + std::to_string(replica.port()), agent_token_);

  post("demo", 1);
  EXPECT_EQ(points("demo"), 1u);
  EXPECT_EQ(points("demo"), 1u);  // cached here
  ReportSpec spec;
  spec.seed = 2;
  spec.commit = make_commit(2);
  ASSERT_EQ(replica_agent.post("/api/v1/runs", make_report(spec)).status, 201);
  wait_for([&] { return points("demo") == 2u; }, "the replica's run in this server's series");

  // A write no kw-server made: the default branch changed by hand.
  EXPECT_EQ(points("demo"), 2u);
  sql("UPDATE projects SET default_branch = 'release' WHERE name = 'demo'");
  wait_for([&] { return points("demo") == 0u; }, "the series of the new default branch");
}

TEST_F(ReadCacheTest, AFeedThatLostItsConnectionServesNothingUntilItListensAgain) {
  post("demo", 1);
  EXPECT_EQ(points("demo"), 1u);
  EXPECT_EQ(points("demo"), 1u);
  const double before = hits();
  const double connects = metric("kw_change_feed_connects_total");
  // Its backend killed, the feed cannot know what it missed.
  sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN kw_changes' "
      "AND datname = current_database()");
  sql("UPDATE projects SET default_branch = 'release' WHERE name = 'demo'");
  wait_for([&] { return metric("kw_change_feed_connects_total") == connects + 1; },
           "the feed to listen again");
  EXPECT_EQ(points("demo"), 0u) << "no answer from before the outage";
  EXPECT_EQ(hits(), before);
  // Cached again once listening. The feed may have listened again before
  // the UPDATE committed, and then hears it at any moment: a read may miss
  // once more before one is kept.
  wait_for(
      [&] {
        const double earlier = hits();
        return points("demo") == 0u && hits() > earlier;
      },
      "a read served from the cache again");
}

}  // namespace
}  // namespace kw::server::testing
