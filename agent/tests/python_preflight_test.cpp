// A python bench's preflight as steps of one process (bench_runs.hpp,
// PythonPreflight), over kwbench.py's CPU stand-in backend (a TEST DOUBLE for
// CUDA and torch) and the TEST DOUBLE of libkw_inject.so
// (kernels/inject/tests/inject_double.cpp), since CUPTI cannot inject
// without a GPU. standin_bench.py writes the pid of every process that
// imports it, so the tests count the interpreters a job started.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

using common::StageName;

class PythonPreflightTest : public PipelineTest {
 protected:
  void SetUp() override {
    PipelineTest::SetUp();
    setenv("KW_INJECT_LIBRARY", KW_INJECT_DOUBLE, 1);
    setenv("KWBENCH_STANDIN_PIDS", (checkout_ / "pids").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("KW_INJECT_LIBRARY");
    unsetenv("KWBENCH_STANDIN_PIDS");
    PipelineTest::TearDown();
  }
  // The processes that imported the bench, in the order they did.
  std::vector<std::string> importers() const {
    std::ifstream in(checkout_ / "pids");
    std::vector<std::string> pids;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) pids.push_back(line);
    return pids;
  }
  // No audit and no prepared replicates: the interpreters counted are the preflight's.
  static json config(const std::string& cases) {
    json config = python_config(cases);
    config["full_bench"]["audit_share"] = 0;
    config["full_bench"]["prepare_processes"] = false;
    return config;
  }
  static json stage(const json& report, StageName name) {
    for (const json& s : report["stages"])
      if (s["name"] == common::to_string(name)) return s;
    return json();
  }
};

TEST_F(PythonPreflightTest, EveryPreflightStageIsAStepOfOneProcessWithItsOwnResult) {
  const json report = run(json::object(), true, config("saxpy/ok,saxpy/edge"), common::preflight_stages());
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "passed", "passed", "passed", "skipped"}))
      << report["stages"].dump(1);
  EXPECT_EQ(importers().size(), 1u) << "one interpreter for the four stages";
  EXPECT_NE(stage(report, StageName::load)["message"].get<std::string>().find("py: imported json"),
            std::string::npos);
  EXPECT_EQ(stage(report, StageName::load)["details"]["py"]["bind_now"], true);
  const std::string geometry = stage(report, StageName::launch_geometry)["message"];
  EXPECT_NE(geometry.find("py: 2 launches; 2 of 2 cases launched as declared"), std::string::npos)
      << geometry;
  // Each stage's own time, the interpreter's start counted to load.
  for (StageName name : {StageName::load, StageName::launch_geometry, StageName::correctness})
    EXPECT_GT(stage(report, name)["duration_ms"].get<std::int64_t>(), 0) << common::to_string(name);
  for (const json& c : report["cases"]) {
    EXPECT_TRUE(c["correctness"]["passed"].get<bool>()) << c.dump();
    EXPECT_TRUE(c.contains("fingerprint")) << c.dump();
  }
}

TEST_F(PythonPreflightTest, AFailedStageEndsTheProcessAndSkipsTheStagesAfterIt) {
  const json report = run(json::object(), true, config("saxpy/nan,saxpy/ok"), common::preflight_stages());
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "passed", "failed", "skipped", "skipped"}))
      << report["stages"].dump(1);
  EXPECT_NE(stage(report, StageName::correctness)["message"].get<std::string>().find(
                "saxpy/nan: 1 output values are NaN/Inf"),
            std::string::npos);
  EXPECT_EQ(importers().size(), 1u);
}

// A pull request: the base's launch pass imports beside the head's
// preflight and runs once the head's waits, and quick_bench times the cases
// whose code changed in the head's preflight process, which waited for them.
TEST_F(PythonPreflightTest, APullRequestTimesItsChangedCasesInItsPreflightProcess) {
  char pattern[] = "/tmp/kw-base-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path base = pattern;
  const auto job = [&](const std::string& base_kernel) {
    std::ofstream(checkout_ / ".kw-double-kernel") << "head-kernel\n";
    std::ofstream(base / ".kw-double-kernel") << base_kernel << "\n";
    fs::remove(checkout_ / "pids");
    PipelineOptions options = ab_options(base);
    options.only_stages = common::preflight_stages();
    return run_pipeline(parse_repo_config(config("saxpy/ok,saxpy/edge")), options);
  };
  const json changed = job("base-kernel");
  const json identical = job("head-kernel");
  fs::remove_all(base);

  const json timed = stage(changed, StageName::quick_bench);
  EXPECT_EQ(timed["status"], "passed") << timed.dump();
  EXPECT_NE(timed["details"]["py"]["cases"][0]["message"].get<std::string>().find("x of baseline:copy"),
            std::string::npos)
      << timed.dump();
  EXPECT_NE(log_.find("1 case(s) changed, 0 case(s) run code identical"), std::string::npos) << log_;
  EXPECT_NE(log_.find("fingerprints of the base from its launch pass, imported beside the head's preflight"),
            std::string::npos)
      << log_;

  const json skipped = stage(identical, StageName::quick_bench);
  EXPECT_EQ(skipped["status"], "passed") << skipped.dump();
  EXPECT_EQ(skipped["message"], "py: 1 case(s) run code identical to the base's: not timed");
  // The head's preflight and the base's launch pass: two interpreters a job
  // (the cases are listed by the preflight, not by a process of their own).
  EXPECT_EQ(importers().size(), 2u);
}

}  // namespace
}  // namespace kw::agent
