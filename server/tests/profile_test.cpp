// Profile jobs: queued on demand and for a regression's worst case, claimed
// only by agents that can run ncu and after the measurements, their results
// checked against the job and kept with the run.
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

constexpr const char* kGpu = "NVIDIA H100 80GB HBM3";

class ProfileTest : public ServerTest {
 protected:
  // A baseline run of commit 1 on main, then a run of `commit` 25% slower.
  json regression(std::uint64_t commit) {
    if (!baseline_) {
      ReportSpec base;
      base.commit = make_commit(1);
      baseline_ = agent().post("/api/v1/runs", make_report(base)).json()["run_id"];
    }
    ReportSpec slower;
    slower.commit = make_commit(commit);
    slower.slowdown = 1.25;
    slower.seed = commit;
    json answer = agent().post("/api/v1/runs", make_report(slower)).json();
    EXPECT_EQ(answer["verdict"], "regression") << answer.dump();
    return client().get("/api/v1/runs/" + answer["run_id"].dump()).json();
  }
  http::Response claim(const std::string& name, bool can_profile) {
    return agent().post("/api/v1/agents/claim",
                        {{"agent", name}, {"gpus", {kGpu}}, {"can_profile", can_profile}});
  }
  // kw profile's summary of one kernel on each side.
  static json summary(const std::string& case_name, const std::string& base, const std::string& head) {
    auto side = [](const std::string& commit, double time_us) {
      return json{
          {"commit", commit},
          {"kernels",
           {{"void attention_forward_kernel<ForwardTraits<128, 128, 64, 4, 2, 0>, __half, 0>(ForwardParams)",
             {{"launches", 4},
              {"time_us", time_us},
              {"sm_pct", 58.2},
              {"memory_pct", 52.3},
              {"occupancy_pct", 12.2},
              {"stalls", {{{"reason", "wait"}, {"cycles_per_issue", 1.94}}}}}}}}};
    };
    return {{"case", case_name},
            {"ncu", "/usr/local/cuda/bin/ncu"},
            {"launch_count", 4},
            {"base", side(base, 1812.1)},
            {"head", side(head, 2265.1)}};
  }
  std::int64_t baseline_ = 0;
};

TEST_F(ProfileTest, ARegressionIsProfiledWhereAnAgentCanRunNcuAfterTheMeasurements) {
  json first = regression(2);
  EXPECT_TRUE(first["profiles"].empty()) << "no agent can run ncu: nothing is queued to wait forever";

  EXPECT_EQ(claim("profiler", true).status, 204);
  json second = regression(3);
  ASSERT_EQ(second["profiles"].size(), 1u) << second.dump();
  EXPECT_EQ(second["profiles"][0]["reason"], "worst_regression");
  EXPECT_EQ(second["profiles"][0]["state"], "queued");
  std::string worst;
  double most = 0;
  for (const json& c : second["comparisons"]) {
    if (c["kind"] == "time" && c["impl"] == "candidate" && c["ratio"].get<double>() > most) {
      most = c["ratio"];
      worst = c["case"];
    }
  }
  EXPECT_EQ(second["profiles"][0]["case"], worst);

  // An agent without ncu never gets it; a measurement goes before it.
  EXPECT_EQ(claim("plain", false).status, 204);
  std::int64_t measurement =
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", make_commit(9)}, {"branch", "main"}})
          .json()["id"];
  auto claimed = claim("profiler", true);
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  EXPECT_EQ(claimed.json()["id"], measurement);
  EXPECT_EQ(claimed.json()["kind"], "measure");
  ASSERT_EQ(agent()
                .post("/api/v1/jobs/" + std::to_string(measurement) + "/fail",
                      {{"agent", "profiler"}, {"reason", "its checkout is gone"}})
                .status,
            200);
  claimed = claim("profiler", true);
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  json job = claimed.json();
  EXPECT_EQ(job["kind"], "profile");
  EXPECT_EQ(job["commit"], make_commit(3));
  EXPECT_EQ(job["base_commit"], make_commit(2)) << "the run the case was compared with";
  EXPECT_EQ(job["gpu_class"], kGpu);
  EXPECT_EQ(job["profile"]["case"], worst);
  EXPECT_EQ(job["profile"]["launch_count"], 10);
  json agents = client().get("/api/v1/agents").json();
  ASSERT_EQ(agents.size(), 3u) << agents.dump();
  EXPECT_EQ(agents[2]["name"], "profiler");
  EXPECT_EQ(agents[2]["can_profile"], true);
  EXPECT_EQ(agents[2]["job"]["kind"], "profile");

  // Its commit's measurement is unaffected: a submit makes the one job.
  auto submitted =
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", make_commit(3)}, {"branch", "main"}});
  EXPECT_EQ(submitted.status, 201) << "the profile job is no measurement of the commit";
  EXPECT_EQ(submitted.json()["kind"], "measure");
}

TEST_F(ProfileTest, AResultIsCheckedAgainstItsJobAndKeptWithTheRun) {
  json run = regression(2);
  const std::string profiles = "/api/v1/runs/" + run["id"].dump() + "/profiles";
  const std::string case_name = run["cases"][1]["name"];

  auto bad = ci().post(profiles, {{"case", "attention.fwd/nope"}});
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(bad.json()["message"], "case: run " + run["id"].dump() + " has no case \"attention.fwd/nope\"");
  EXPECT_EQ(ci().post(profiles, {{"case", case_name}, {"launch_count", 0}}).status, 422);
  EXPECT_EQ(ci().post(profiles, {{"case", case_name}, {"base_commit", "main"}}).json()["message"],
            "base_commit: must be a 40-character lowercase hex SHA");
  EXPECT_EQ(ci().post("/api/v1/runs/999999/profiles", {{"case", case_name}}).status, 404);
  EXPECT_EQ(agent().post(profiles, {{"case", case_name}}).status, 403) << "an agent token queues no profile";
  EXPECT_EQ(sql("SELECT count(*) FROM profiles")[0][0].as<int>(), 0);

  auto queued = ci().post(profiles, {{"case", case_name}, {"launch_count", 4}});
  ASSERT_EQ(queued.status, 201) << queued.body;
  EXPECT_EQ(queued.json()["state"], "queued");
  EXPECT_EQ(queued.json()["requested_by"], "ci");
  EXPECT_NE(
      queued.json()["note"].get<std::string>().find("no agent of NVIDIA H100 80GB HBM3 with Nsight Compute"),
      std::string::npos);
  const std::string profile = "/api/v1/profiles/" + queued.json()["id"].dump();

  auto claimed = claim("profiler", true);
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  const std::string job = "/api/v1/jobs/" + claimed.json()["id"].dump();
  EXPECT_EQ(agent().post(job + "/report", make_report({})).json()["error"], "not_a_measurement_job");

  const std::string base = make_commit(1), head = make_commit(2);
  json result{{"agent", "profiler"},
              {"summary", summary(case_name, base, head)},
              {"head_csv", "\"ID\",\"Kernel Name\"\n"}};
  auto post = [&](const json& body) { return agent().post(job + "/profile", body); };
  json wrong = result;
  wrong["summary"]["head"]["commit"] = base;
  auto refused = post(wrong);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"], "summary.head.commit: must be the job's head commit " + head);
  wrong = result;
  wrong["summary"]["base"]["kernels"] = json::object();
  EXPECT_EQ(post(wrong).json()["message"], "summary.base.kernels: must be an object of at least one kernel");
  wrong = result;
  wrong["summary"]["case"] = "attention.fwd/case0";
  EXPECT_EQ(post(wrong).json()["field"], "summary.case");
  wrong = result;
  wrong["summary"]["head"]["kernels"].begin().value()["stalls"][0].erase("cycles_per_issue");
  EXPECT_EQ(post(wrong).status, 422);
  wrong = result;
  wrong["agent"] = "someone-else";
  EXPECT_EQ(post(wrong).status, 409);
  EXPECT_EQ(client().get(profile).json()["state"], "running") << "nothing was stored";
  EXPECT_TRUE(client().get(profile).json()["summary"].is_null());

  auto stored = post(result);
  ASSERT_EQ(stored.status, 200) << stored.body;
  EXPECT_EQ(stored.json()["state"], "done");
  EXPECT_EQ(post(result).status, 200) << "a retry of a stored result is answered as before";
  json kept = client().get(profile).json();
  EXPECT_EQ(kept["summary"]["head"]["commit"], head);
  EXPECT_EQ(kept["csv"]["head"], true);
  EXPECT_EQ(kept["csv"]["base"], false);
  auto csv = client().get(profile + "/ncu/head");
  EXPECT_EQ(csv.status, 200);
  EXPECT_EQ(csv.body, "\"ID\",\"Kernel Name\"\n");
  EXPECT_EQ(client().get(profile + "/ncu/base").json()["error"], "no_csv");
  EXPECT_EQ(client().get(profile + "/ncu/side").status, 404);
  json again = client().get("/api/v1/runs/" + run["id"].dump()).json();
  ASSERT_EQ(again["profiles"].size(), 1u);
  EXPECT_EQ(again["profiles"][0]["state"], "done");

  // The same request is the profile there is; `again` makes another.
  EXPECT_EQ(ci().post(profiles, {{"case", case_name}, {"launch_count", 4}}).status, 200);
  EXPECT_EQ(ci().post(profiles, {{"case", case_name}, {"launch_count", 4}, {"again", true}}).status, 201);
}

TEST_F(ProfileTest, AProfileTheAgentCouldNotRunFailsWithItsReasonAndCanBeAskedAgain) {
  json run = regression(2);
  const std::string profiles = "/api/v1/runs/" + run["id"].dump() + "/profiles";
  const std::string case_name = run["cases"][0]["name"];
  std::int64_t id = ci().post(profiles, {{"case", case_name}}).json()["id"];
  auto claimed = claim("profiler", true);
  ASSERT_EQ(claimed.status, 200);
  auto failed =
      agent().post("/api/v1/jobs/" + claimed.json()["id"].dump() + "/fail",
                   {{"agent", "profiler"}, {"reason", "head: ncu profiled no kernel of " + case_name}});
  ASSERT_EQ(failed.status, 200) << failed.body;
  json profile = client().get("/api/v1/profiles/" + std::to_string(id)).json();
  EXPECT_EQ(profile["state"], "failed");
  EXPECT_NE(profile["error"].get<std::string>().find("ncu profiled no kernel"), std::string::npos);
  auto asked = ci().post(profiles, {{"case", case_name}});
  EXPECT_EQ(asked.status, 201) << "a failed profile is not the answer to a new request";
  EXPECT_NE(asked.json()["id"], id);
}

TEST_F(ProfileTest, ARunWithoutAGpuHasNothingToProfile) {
  ReportSpec cpu;
  cpu.commit = make_commit(4);
  json report = make_report(cpu);
  report["device"]["kind"] = "cpu";
  auto stored = agent().post("/api/v1/runs", report);
  ASSERT_EQ(stored.status, 201) << stored.body;
  json run = client().get("/api/v1/runs/" + stored.json()["run_id"].dump()).json();
  auto refused =
      ci().post("/api/v1/runs/" + run["id"].dump() + "/profiles", {{"case", run["cases"][0]["name"]}});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(refused.json()["error"], "not_a_gpu_run");
}

}  // namespace
}  // namespace kw::server::testing
