// Every path to a verdict says the same of a case: the run page, compare,
// and the words a first run gets. A pull request's run measured its base in
// the same job; compare shows that judgement, not one of its own.
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class VerdictPathsTest : public ServerTest {
 protected:
  // A pull request's report: 7 cases, base and head measured in one job,
  // two of them 20% slower on the head.
  json pull_request(std::uint64_t seed) {
    ReportSpec spec;
    spec.commit = make_commit(seed + 1);
    spec.base_commit = make_commit(seed);
    spec.branch = "pr-12";
    spec.cases = 7;
    spec.replicates = 4;
    spec.samples = 20;
    spec.ab = true;
    spec.seed = seed;
    json report = make_report(spec);
    for (int slowed : {1, 4}) {
      for (json& m : report["cases"][slowed]["measurements"]) {
        if (m["impl"] != "candidate") continue;
        for (json& sample : m["samples_ns"]) sample = sample.get<double>() * 1.2;
        m["median_ns"] = m["median_ns"].get<double>() * 1.2;
      }
    }
    return report;
  }
  static std::map<std::string, std::string> statuses(const json& rows, const char* name_key) {
    std::map<std::string, std::string> out;
    for (const json& row : rows) {
      if (row.value("kind", "time") == "time" && row.value("impl", "candidate") == "candidate")
        out[row[name_key].get<std::string>()] = row["status"];
    }
    return out;
  }
};

TEST_F(VerdictPathsTest, CompareShowsTheInJobJudgementTheRunPageShows) {
  const json report = pull_request(40);
  auto stored = agent().post("/api/v1/runs", report);
  ASSERT_EQ(stored.status, 201) << stored.body;
  EXPECT_EQ(stored.json()["verdict"], "regression");
  const std::string run_id = stored.json()["run_id"].dump();
  const json run = client().get("/api/v1/runs/" + run_id).json();
  const auto on_run_page = statuses(run["comparisons"], "case");
  ASSERT_EQ(on_run_page.size(), 7u);
  int flagged = 0;
  for (const auto& [name, status] : on_run_page) flagged += status == "regression";
  EXPECT_EQ(flagged, 2);

  const json compared =
      client()
          .get("/api/v1/compare?project=demo&base=" + report["base_commit"].get<std::string>() +
               "&head=" + report["commit"].get<std::string>())
          .json();
  ASSERT_EQ(compared["gpus"].size(), 1u) << compared.dump() << ": the base has no run of its own";
  const json& gpu = compared["gpus"][0];
  EXPECT_EQ(gpu["source"], "in_job");
  EXPECT_EQ(gpu["head_run_id"].dump(), run_id);
  EXPECT_EQ(statuses(gpu["cases"], "case"), on_run_page);
  for (const json& c : gpu["cases"]) {
    const auto on_page =
        std::find_if(run["comparisons"].begin(), run["comparisons"].end(), [&](const json& x) {
          return x["case"] == c["case"] && x["impl"] == "candidate" && x["kind"] == "time";
        });
    EXPECT_EQ(c["ratio"], (*on_page)["ratio"]) << c["case"];
    EXPECT_EQ(c["upper"], (*on_page)["upper"]) << c["case"];
  }

  // The base measured on its own too: compare still shows the in-job A/B,
  // and says so.
  ReportSpec base_alone;
  base_alone.commit = report["base_commit"];
  base_alone.cases = 7;
  base_alone.replicates = 4;
  base_alone.samples = 20;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(base_alone)).status, 201);
  const json again =
      client()
          .get("/api/v1/compare?project=demo&base=" + report["base_commit"].get<std::string>() +
               "&head=" + report["commit"].get<std::string>())
          .json();
  EXPECT_EQ(again["gpus"][0]["source"], "in_job");
  EXPECT_EQ(statuses(again["gpus"][0]["cases"], "case"), on_run_page);
  // Two commits measured in different jobs: a cross-run compare, labelled so.
  const json cross = client()
                         .get("/api/v1/compare?project=demo&base=" + report["commit"].get<std::string>() +
                              "&head=" + report["base_commit"].get<std::string>())
                         .json();
  ASSERT_EQ(cross["gpus"].size(), 1u) << cross.dump();
  EXPECT_EQ(cross["gpus"][0]["source"], "cross_run");
}

}  // namespace
}  // namespace kw::server::testing
