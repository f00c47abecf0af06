// One test over both servers a route test runs (the in-memory stand-in's,
// routed_server.hpp, and kw-server on PostgreSQL, server_fixture.hpp): what
// a claim says of the project's audit on the claiming GPU model.
#pragma once

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "job_bodies.hpp"

namespace kw::server::testing {

// While few identical cases have been audited on a GPU model, a claim on it
// asks the job to audit a quarter of its identical cases; the count is the
// project's audited cases on that model, whatever posted them.
// `agent` and `ci`: the server's clients with those tokens.
template <typename Client>
void a_claim_says_how_many_cases_the_project_audited(Client agent, Client ci) {
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  kw::testing::ReportSpec main_run;
  main_run.commit = kw::testing::make_commit(1);
  main_run.cases = 3;
  ASSERT_EQ(agent.post("/api/v1/runs", kw::testing::make_report(main_run)).status, 201);
  kw::testing::ReportSpec pr = main_run;
  pr.commit = kw::testing::make_commit(2);
  pr.branch = "pr-1";
  pr.base_commit = main_run.commit;
  pr.replicates = 4;
  pr.ab = true;
  nlohmann::json report = kw::testing::make_report(pr);
  for (std::size_t i = 0; i < 2; ++i) {  // two of its cases run the base's code, timed as the audit
    report["cases"][i]["fingerprint"] = {{"digest", std::string(64, 'a')},
                                         {"parts", nlohmann::json::object()}};
    report["cases"][i]["audit"] = true;
  }
  auto posted = agent.post("/api/v1/runs", report);
  ASSERT_EQ(posted.status, 201) << posted.body;

  ci.post("/api/v1/jobs", job_request(9));
  auto claim = agent.post("/api/v1/agents/claim", claim_body("host-a"));
  ASSERT_EQ(claim.status, 200) << claim.body;
  EXPECT_EQ(claim.json()["audit"],
            nlohmann::json({{"gpu_model", h100}, {"audited", 2}, {"until", 300}, {"share", 0.25}}));
  ci.post("/api/v1/jobs", job_request(10));
  auto elsewhere = agent.post("/api/v1/agents/claim", claim_body("host-l4", {"NVIDIA L4"}));
  ASSERT_EQ(elsewhere.status, 200) << elsewhere.body;
  EXPECT_EQ(elsewhere.json()["audit"]["audited"], 0) << "another model's audit is its own";
}

}  // namespace kw::server::testing
