// What the detection tests share, whichever server they run on (Server: the
// routes over the in-memory store, RoutedServerTest, or kw-server on
// PostgreSQL, ServerTest): reports posted with a commit and seed of their
// own, and a run's comparisons read back.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../../tests/support/report_factory.hpp"

namespace kw::server::testing {

template <typename Server>
class DetectionTest : public Server {
 protected:
  using json = nlohmann::json;

  // Posts a run and returns the answer (run_id, verdict).
  json post(kw::testing::ReportSpec spec) {
    if (spec.commit.empty()) spec.commit = kw::testing::make_commit(next_commit_++);
    spec.seed = next_seed_++;
    auto response = this->agent().post("/api/v1/runs", kw::testing::make_report(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    json answer = response.json();
    answer["commit"] = spec.commit;
    return answer;
  }
  json run(const json& answer) {
    return this->client().get("/api/v1/runs/" + std::to_string(answer["run_id"].template get<int>())).json();
  }
  // The candidate-time comparison of the case.
  json candidate_comparison(const json& answer, const std::string& case_name = "attention.fwd/case0") {
    json full = run(answer);
    for (const json& c : full["comparisons"]) {
      if (c["case"] == case_name && c["kind"] == "time" && c["impl"] == "candidate") return c;
    }
    ADD_FAILURE() << "no candidate comparison for " << case_name;
    return {};
  }

  std::uint64_t next_commit_ = 1;
  std::uint64_t next_seed_ = 1000;
};

}  // namespace kw::server::testing
