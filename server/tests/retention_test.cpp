// Sample retention (schema 027, store/sample_retention.hpp) on a real
// PostgreSQL: runs stored, their samples aged into an old month's partition
// by moving their rows (PostgreSQL moves a row whose partition key changes),
// then the policy applied as kw-server applies it.
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"
#include "store/sample_retention.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class RetentionTest : public ServerTest {
 protected:
  std::int64_t post(std::uint64_t seed, double slowdown = 1.0) {
    ReportSpec spec;
    spec.seed = seed;
    spec.commit = make_commit(seed);
    spec.slowdown = slowdown;
    auto response = agent().post("/api/v1/runs", make_report(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    last_verdict_ = response.json()["verdict"].get<std::string>();
    return response.json()["run_id"].get<std::int64_t>();
  }
  // The runs' samples as if stored in January 2025.
  void age(const std::vector<std::int64_t>& runs) {
    sql("SELECT kw_samples_month('2025-01-15')");
    std::string ids;
    for (std::int64_t run : runs) ids += (ids.empty() ? "" : ",") + std::to_string(run);
    sql("UPDATE samples SET stored_on = '2025-01-15' WHERE case_id IN (SELECT id FROM cases WHERE run_id IN "
        "(" +
        ids + "))");
  }
  RetentionOutcome apply(const RetentionPolicy& policy) {
    return apply_retention([this](auto&& body) { return with_transaction(app_->pool(), body); }, policy);
  }
  json run(std::int64_t id) { return client().get("/api/v1/runs/" + std::to_string(id)).json(); }
  std::string series() {
    return client().get("/api/v1/projects/demo/series?case=" + http::url_encode("attention.fwd/case0")).body;
  }
  int count(const std::string& query) { return sql(query)[0][0].as<int>(); }

  std::string last_verdict_;
};

TEST_F(RetentionTest, OldMonthsGoWholeAndTheNewestJudgedRunsKeepTheirSamples) {
  const std::int64_t first = post(1);
  const std::string first_verdict = last_verdict_;
  const std::int64_t second = post(2), third = post(3);
  age({first, second, third});
  const std::string series_before = series();
  const int third_rows =
      count("SELECT count(*) FROM samples s JOIN cases c ON c.id = s.case_id WHERE c.run_id = " +
            std::to_string(third));
  ASSERT_GT(third_rows, 0);

  EXPECT_TRUE(apply({0, 1}).dropped.empty()) << "0 days: kept for ever";
  EXPECT_TRUE(apply({1000, 1}).dropped.empty()) << "not old enough";

  const RetentionOutcome outcome = apply({30, 1});
  EXPECT_EQ(outcome.dropped, (std::vector<std::string>{"samples_2025_01"}));
  EXPECT_EQ(outcome.moved, third_rows) << "each case's newest judged run keeps its samples";
  EXPECT_EQ(count("SELECT count(*) FROM pg_class WHERE relname = 'samples_2025_01'"), 0);

  // The first run: its summaries and verdict, without its samples.
  const json old = run(first);
  EXPECT_EQ(old["verdict"], first_verdict);
  const json& measurement = old["cases"][0]["measurements"][0];
  EXPECT_FALSE(measurement["samples_kept"].get<bool>());
  EXPECT_TRUE(measurement["samples_ns"].empty());
  EXPECT_GT(measurement["median_ns"].get<double>(), 0);
  EXPECT_FALSE(run(second)["cases"][0]["measurements"][0]["samples_kept"].get<bool>());
  const json kept = run(third)["cases"][0]["measurements"][0];
  EXPECT_TRUE(kept["samples_kept"].get<bool>());
  EXPECT_EQ(kept["samples_ns"].size(), 30u);

  EXPECT_EQ(series(), series_before) << "a series reads only summaries";

  // Judged against the kept run, as before retention.
  const std::int64_t slower = post(4, 1.5);
  EXPECT_EQ(last_verdict_, "regression");
  const json flagged = run(slower)["flagged"];
  ASSERT_FALSE(flagged.empty());
  EXPECT_EQ(flagged[0]["baseline_run_id"], third);
  EXPECT_EQ(flagged[0]["status"], "regression");
}

TEST_F(RetentionTest, AMonthIsKeptWhileNothingIsOldEnough) {
  post(1);
  const RetentionOutcome outcome = apply({1, 1});
  EXPECT_TRUE(outcome.dropped.empty());
  EXPECT_EQ(outcome.moved, 0);
  EXPECT_GT(count("SELECT count(*) FROM samples"), 0);
}

// A pull request on a base whose run is older than the newest runs of main:
// while the pull request is recent its base keeps its samples; once they
// expire, the pull request measured again is judged against main's newest
// run that has them, says so, and its slowdown is still a regression (it
// was judged pass, every comparison no-baseline, before).
TEST_F(RetentionTest, APullRequestsBaseKeepsItsSamplesOrFallsBackSayingWhy) {
  const std::int64_t base = post(1);
  const std::int64_t newest = post(2);
  post(3);
  auto pull_request = [&](std::uint64_t seed) {
    ReportSpec spec;
    spec.seed = seed;
    spec.commit = make_commit(100);
    spec.base_commit = make_commit(1);
    spec.branch = "pr-3";
    spec.slowdown = 1.4;
    auto response = agent().post("/api/v1/runs", make_report(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  };
  const json first = pull_request(50);
  EXPECT_EQ(first["verdict"], "regression");
  age({base, newest, newest + 1, first["run_id"].get<std::int64_t>()});

  // Recent, the pull request keeps its base's samples.
  apply({30, 1});
  const json again = pull_request(51);
  EXPECT_EQ(again["verdict"], "regression");
  const json kept_base = run(again["run_id"].get<std::int64_t>())["flagged"];
  ASSERT_FALSE(kept_base.empty());
  EXPECT_EQ(kept_base[0]["baseline_run_id"], base);

  // Months later: nothing uses that base any more, and its samples go.
  sql("UPDATE runs SET created_at = '2025-01-15' WHERE base_commit IS NOT NULL");
  age({base, newest, newest + 1});
  apply({30, 1});
  ASSERT_EQ(count("SELECT count(*) FROM samples s JOIN cases c ON c.id = s.case_id WHERE c.run_id = " +
                  std::to_string(base)),
            0);
  const json late = pull_request(52);
  EXPECT_EQ(late["verdict"], "regression") << "judged against main's newest run with samples";
  const json flagged = run(late["run_id"].get<std::int64_t>())["flagged"];
  ASSERT_FALSE(flagged.empty());
  EXPECT_EQ(flagged[0]["baseline_run_id"], newest + 1);
  const std::string reason = flagged[0]["baseline_reason"];
  EXPECT_NE(
      reason.find("run " + std::to_string(base) + " on NVIDIA H100 80GB HBM3 has no samples left (expired"),
      std::string::npos)
      << reason;
}

}  // namespace
}  // namespace kw::server::testing
