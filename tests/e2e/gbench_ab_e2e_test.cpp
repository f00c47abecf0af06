// Google Benchmark pull requests on a busy shared CPU host, end to end: a
// repository of four CPU benchmarks, a real kw-server, one `kw agent`, and a
// concurrent build loading both cores the whole time. Each pull request is
// measured A/B in its own job by the measurement engine (replicates, each a
// fresh process, base and head alternating): a no-op change must pass, and
// one benchmark made 10% slower must be flagged.
//
// The project gates at 3%, as a team with CPU benchmarks on a shared runner
// would set it. At the default 1%, each run may flag an unchanged case at its
// 1% family-wise rate, so 20 runs would fail this test up to ~18% of the time
// by design (a memory-bound benchmark moved 1.7% once in 70 unchanged
// comparisons of a CI run).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "../support/e2e.hpp"

namespace {

using namespace kw::testing;
using nlohmann::json;

constexpr int kPullRequests = 10;

// The benchmarks (tests/data/gbench-busy-host/bench.cpp): a sort, a sum, a
// copy and a map; BM_Sort sorts `sort_n`.
std::string bench_source(int sort_n) {
  std::ifstream in(std::string(KW_TEST_DATA_DIR) + "/gbench-busy-host/bench.cpp");
  std::stringstream source;
  source << in.rdbuf();
  EXPECT_FALSE(source.str().empty()) << "tests/data/gbench-busy-host/bench.cpp";
  return "#define SORT_N " + std::to_string(sort_n) + "\n" + source.str();
}

class GbenchAbE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_dir_ = make_temp_dir("kw-e2e-gbench-ab");
    server_ = std::make_unique<ServerUnderTest>(std::vector<std::string>{});
    server_->start();
    server_->project("demo");
    const auto settings = server_->client(server_->token("admin", "admin"))
                              .request("PUT", "/api/v1/projects/demo/settings", R"({"min_threshold": 0.03})");
    ASSERT_EQ(settings.status, 200) << settings.body;
    agent_token_ = server_->token("agent", "cpu-hosts");
    ci_token_ = server_->token("ci", "ci");
  }
  void TearDown() override {
    agents_.clear();
    load_.clear();
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }

  // Two compilers rebuilding a source file over and over: a shared runner
  // building another project meanwhile.
  void load_the_host() {
    std::ofstream(work_dir_ / "load.cpp")
        << "#include <map>\n#include <regex>\n#include <string>\n"
           "int main() { std::map<std::string, std::regex> m; return 0; }\n";
    for (int i = 0; i < 2; ++i) {
      const std::string object = (work_dir_ / ("load" + std::to_string(i) + ".o")).string();
      load_.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
          "/bin/sh", "-c",
          "while :; do c++ -O2 -c " + (work_dir_ / "load.cpp").string() + " -o " + object + "; done"}));
    }
  }

  std::int64_t submit(const std::string& commit, const std::string& branch, const std::string& base) {
    auto response = server_->client(ci_token_).post("/api/v1/jobs", {{"project", "demo"},
                                                                     {"commit", commit},
                                                                     {"branch", branch},
                                                                     {"base_commit", base},
                                                                     {"rerun", true}});
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["id"];
  }

  fs::path work_dir_;
  TrackedRepo repo_;
  std::unique_ptr<ServerUnderTest> server_;
  std::string agent_token_, ci_token_;
  std::vector<std::unique_ptr<ChildProcess>> agents_, load_;
};

TEST_F(GbenchAbE2eTest, NoOpPullRequestsPassAndATenPercentSlowdownIsFlaggedOnABusyHost) {
  json config{{"project", "demo"},
              {"build", {{"commands", {"c++ -O2 -std=c++17 -o bench bench.cpp -lbenchmark -lpthread"}}}},
              {"benches", {{{"name", "cpu"}, {"path", "bench"}, {"format", "gbench"}}}},
              {"full_bench",
               {{"replicates", 4},
                {"max_replicates", 6},
                {"confirm_replicates", 4},
                {"replicate_seconds", 0.1},
                {"min_samples", 10}}}};
  repo_.write("kernelwatch.json", config.dump(2));
  repo_.write("bench.cpp", bench_source(20000));
  const std::string base = repo_.commit("four CPU benchmarks");
  repo_.write("bench.cpp", "// only a comment changed\n" + bench_source(20000));
  const std::string no_op = repo_.commit("a comment");
  repo_.git({"checkout", "-q", base});
  repo_.write("bench.cpp", bench_source(22000));  // BM_Sort about 10% slower
  const std::string slower = repo_.commit("BM_Sort sorts 10% more");
  repo_.git({"checkout", "-q", "main"});

  load_the_host();
  agents_.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
      KW_BINARY, "agent", "--server", server_->url(), "--token", agent_token_, "--work-dir",
      (work_dir_ / "agent").string(), "--repo", "demo=" + repo_.dir().string(), "--name", "cpu-host",
      "--poll-seconds", "0.2"}));

  std::map<std::string, std::map<std::string, int>> verdicts;  // kind -> verdict -> count
  std::string flagged_cases;
  for (int i = 0; i < 2 * kPullRequests; ++i) {
    const bool slow = i % 2 == 1;  // alternating, so both kinds see the same load over time
    const std::string kind = slow ? "slower" : "no-op";
    const std::int64_t job = submit(slow ? slower : no_op, kind + "-" + std::to_string(i), base);
    const json done = wait_for_job(
        *server_, job, [](const json& j) { return j["state"] == "done" || j["state"] == "failed"; },
        std::chrono::seconds(240));
    ASSERT_EQ(done["state"], "done") << done.dump() << "\n" << agents_.back()->output();
    const std::string verdict = done["verdict"];
    ++verdicts[kind][verdict];
    const json run = server_->client()
                         .get("/api/v1/runs/" + std::to_string(done["run_id"].get<int>()) + "?per_page=100")
                         .json();
    for (const json& c : run["comparisons"]) {
      if (c["impl"] != "candidate" || c["kind"] != "time") continue;
      EXPECT_EQ(c["method"], "ab") << "judged on its own A/B: " << c.dump();
      if (c["status"] == "regression") flagged_cases += kind + ":" + c["case"].get<std::string>() + " ";
      std::cout << kind << " " << i << " " << c["case"].get<std::string>() << " " << c["ratio"] << " ["
                << c["lower"] << ", " << c["upper"] << "] " << c["status"] << "\n";
    }
    std::cout << kind << " " << i << ": " << verdict << "\n";
  }
  // No no-op pull request is blocked: each passes the gate. A shared host
  // may still move one job's memory-bound benchmarks together (the head
  // faster than its base on three of four in one CI run), which the gate
  // lets through as an improvement; more than one such job is a failure.
  EXPECT_EQ(verdicts["no-op"]["pass"] + verdicts["no-op"]["improvement"], kPullRequests) << flagged_cases;
  EXPECT_LE(verdicts["no-op"]["improvement"], 1) << flagged_cases;
  EXPECT_EQ(verdicts["slower"]["regression"], kPullRequests) << flagged_cases;
  // Only BM_Sort is slower: no other case of a slower pull request is flagged.
  EXPECT_EQ(flagged_cases.find("BM_Sum"), std::string::npos) << flagged_cases;
  EXPECT_EQ(flagged_cases.find("BM_Copy"), std::string::npos) << flagged_cases;
  EXPECT_EQ(flagged_cases.find("BM_Map"), std::string::npos) << flagged_cases;
}

}  // namespace
