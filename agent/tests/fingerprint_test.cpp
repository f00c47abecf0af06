// Fingerprints (the fake kwbench writes what libkw_inject.so would): a pull
// request times only the cases whose code changed, and its audit.
#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

class FingerprintTest : public PipelineTest {
 protected:
  void SetUp() override {
    PipelineTest::SetUp();
    setenv("KW_INJECT_LIBRARY", KW_FAKE_BENCH, 1);  // stands in: the test double writes the records
    char pattern[] = "/tmp/kw-base-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    base_ = pattern;
  }
  void TearDown() override {
    unsetenv("KW_INJECT_LIBRARY");
    fs::remove_all(base_);
    PipelineTest::TearDown();
  }
  json pull_request(const json& head, const json& base, double audit_share) {
    std::ofstream(checkout_ / "kwbench-fake.json") << head.dump();
    std::ofstream(base_ / "kwbench-fake.json") << base.dump();
    json config = valid_config();
    config["full_bench"] = {{"replicates", 2},
                            {"max_replicates", 2},
                            {"confirm_replicates", 0},
                            {"resolve_replicates", 0},
                            {"audit_share", audit_share}};
    return run_ab(config, base_);
  }
  // Two benches of two cases each, identical on both sides, audited at 5%.
  json two_identical_benches() {
    std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
    std::ofstream(base_ / "kwbench-fake.json") << "{}";
    json config = valid_config();
    json second = config["benches"][0];
    second["name"] = "second";
    second["args"] = {"--case-prefix", "second."};
    config["benches"].push_back(second);
    config["full_bench"] = {{"replicates", 2},
                            {"max_replicates", 2},
                            {"confirm_replicates", 0},
                            {"resolve_replicates", 0},
                            {"audit_share", 0.05}};
    return config;
  }
  static const json* case_named(const json& report, const std::string& name) {
    for (const json& c : report["cases"])
      if (c["name"] == name) return &c;
    return nullptr;
  }
  fs::path base_;
};

TEST_F(FingerprintTest, APullRequestTimesOnlyTheCasesWhoseKernelChanged) {
  const json ab = pull_request({{"kernel_code", {{"fake.scale/n16m", "v2"}}}}, json::object(), 0);
  ASSERT_NO_THROW(common::parse_run_report(ab)) << ab.dump();
  const json* same = case_named(ab, "fake.scale/n1m");
  const json* changed = case_named(ab, "fake.scale/n16m");
  ASSERT_TRUE(same != nullptr && changed != nullptr) << ab.dump();
  EXPECT_EQ(same->value("identical_to_base", false), true) << same->dump();
  EXPECT_TRUE(same->value("measurements", json::array()).empty()) << same->dump();
  EXPECT_EQ((*same)["fingerprint"]["digest"].get<std::string>().size(), 64U);
  EXPECT_TRUE(changed->contains("base_measurements")) << changed->dump();
  EXPECT_NE((*changed)["fingerprint"]["digest"], (*same)["fingerprint"]["digest"]);
  const json& details = ab["stages"][5]["details"]["fake"]["fingerprints"];
  EXPECT_EQ(details["changed"]["fake.scale/n16m"], "the code of kernel fake_kernel_n16m(float*)") << details;
  // The case says it too, with the base's side, for the run page and the comment.
  EXPECT_EQ((*changed)["changed_from_base"]["differs"],
            json({"the code of kernel fake_kernel_n16m(float*)"}));
  EXPECT_EQ((*changed)["changed_from_base"]["base"]["digest"].get<std::string>().size(), 64U);
  EXPECT_NE((*changed)["changed_from_base"]["base"]["digest"], (*changed)["fingerprint"]["digest"]);
  EXPECT_FALSE(same->contains("changed_from_base")) << same->dump();
  EXPECT_NE(log_.find("fake.scale/n16m changed: the code of kernel fake_kernel_n16m(float*)"),
            std::string::npos)
      << log_;
  EXPECT_EQ(details["not_timed"], 1);
  EXPECT_NE(ab["stages"][5]["message"].get<std::string>().find("1 identical to the base, not timed"),
            std::string::npos);
}

// quick_bench too times the changed cases alone, in a process of its own
// after the preflight's launch_geometry and correctness of every case.
TEST_F(FingerprintTest, QuickBenchTimesOnlyTheCasesWhoseKernelChanged) {
  std::ofstream(checkout_ / "kwbench-fake.json") << json{{"kernel_code", {{"fake.scale/n16m", "v2"}}}}.dump();
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}, {"replicates", 2}, {"max_replicates", 2}};
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  ASSERT_NO_THROW(common::parse_run_report(report)) << report.dump();
  EXPECT_EQ(report["stages"][3]["details"]["fake"]["cases_run"], 2) << report["stages"][3].dump();
  const json& quick = report["stages"][4];
  EXPECT_EQ(quick["status"], "passed") << quick.dump();
  EXPECT_EQ(quick["details"]["fake"]["cases_run"], 1) << quick.dump();
  EXPECT_EQ(quick["details"]["fake"]["identical_to_base"], 1) << quick.dump();
  EXPECT_NE(quick["message"].get<std::string>().find("1 case(s) run code identical to the base's: not timed"),
            std::string::npos)
      << quick.dump();
}

TEST_F(FingerprintTest, AnIdenticalPullRequestTimesItsAuditOrNothing) {
  const json audited = pull_request(json::object(), json::object(), 0.05);
  ASSERT_NO_THROW(common::parse_run_report(audited));
  int identical = 0, audits = 0;
  for (const json& c : audited["cases"]) {
    identical += c.value("identical_to_base", false);
    if (c.value("audit", false)) {
      ++audits;
      EXPECT_TRUE(c.contains("base_measurements")) << c.dump();
    }
  }
  EXPECT_EQ(identical, 1) << audited.dump();  // at least one audited, whatever the share
  EXPECT_EQ(audits, 1) << audited.dump();

  log_.clear();
  const json untimed = pull_request(json::object(), json::object(), 0);
  ASSERT_NO_THROW(common::parse_run_report(untimed));
  EXPECT_EQ(untimed["stages"][5]["status"], "passed") << untimed["stages"][5].dump();
  for (const json& c : untimed["cases"]) EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
  EXPECT_EQ(log_.find("replicate 1 of every case"), std::string::npos) << log_;
}

// The audit is drawn once a job, over every bench's identical cases: two
// benches of two identical cases each, at 5%, time one case in all.
// While the project has audited few cases on the GPU model the server asks
// a job for a larger share; never a smaller one than kernelwatch.json's,
// and an audit turned off stays off.
TEST(JobAuditShare, TheServersShareRaisesTheProjectsAndNeverTurnsTheAuditOn) {
  const json warming = {
      {"gpu_model", "NVIDIA H100 80GB HBM3"}, {"audited", 12}, {"until", 300}, {"share", 0.25}};
  const json enough = {
      {"gpu_model", "NVIDIA H100 80GB HBM3"}, {"audited", 300}, {"until", 300}, {"share", nullptr}};
  EXPECT_EQ(job_audit_share(0.05, warming), 0.25);
  EXPECT_EQ(job_audit_share(0.5, warming), 0.5);
  EXPECT_EQ(job_audit_share(0.05, enough), 0.05);
  EXPECT_EQ(job_audit_share(0.05, json()), 0.05) << "an older server says nothing";
  EXPECT_EQ(job_audit_share(0, warming), 0) << "turned off in kernelwatch.json";
  EXPECT_EQ(audit_count(8, job_audit_share(0.05, warming)), 2u);
}

TEST_F(FingerprintTest, TheAuditIsDrawnOnceAJobNotOnceABench) {
  const json config = two_identical_benches();
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  ASSERT_NO_THROW(common::parse_run_report(report)) << report.dump();
  ASSERT_EQ(report["cases"].size(), 4U) << report.dump();
  int audits = 0, identical = 0;
  for (const json& c : report["cases"]) {
    audits += static_cast<int>(c.value("audit", false));
    identical += static_cast<int>(c.value("identical_to_base", false));
  }
  EXPECT_EQ(audits, 1) << report.dump();
  EXPECT_EQ(identical, 3) << report.dump();
  for (const char* bench : {"fake", "second"})
    EXPECT_EQ(report["stages"][4]["details"][bench]["identical_to_base"], 2) << report["stages"][4].dump();
}

// The audit is the job's own draw (seeded from its id): the same job draws
// the same case every time it runs, and other jobs draw others.
TEST_F(FingerprintTest, AJobsAuditIsTheSameDrawEveryTimeItRuns) {
  const json config = two_identical_benches();
  auto audited_by = [&](std::int64_t job_id) {
    PipelineOptions options = ab_options(base_);
    options.only_stages = {common::StageName::full_bench};
    options.job_id = job_id;
    const json report = run_pipeline(parse_repo_config(config), options);
    std::vector<std::string> audited;
    for (const json& c : report["cases"])
      if (c.value("audit", false)) audited.push_back(c["name"]);
    EXPECT_EQ(audited.size(), 1U) << report.dump();
    return audited;
  };
  std::set<std::vector<std::string>> drawn;
  for (std::int64_t job = 1; job <= 6; ++job) {
    const auto first = audited_by(job);
    EXPECT_EQ(audited_by(job), first) << "job " << job;
    drawn.insert(first);
  }
  EXPECT_GT(drawn.size(), 1U) << "six jobs drew the same case";
}

TEST_F(FingerprintTest, AHostCodeChangeTimesEveryCaseItRuns) {
  for (const fs::path& side : {checkout_, base_}) fs::create_directories(side / "build");
  fs::copy_file("/bin/true", checkout_ / "build/libhost.so");
  fs::copy_file("/bin/true", base_ / "build/libhost.so");
  const json host = {{"host_files", {"build/libhost.so"}}};
  const json same = pull_request(host, host, 0);
  for (const json& c : same["cases"]) {
    EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
    EXPECT_TRUE(c["fingerprint"]["parts"]["host"].contains("build/libhost.so")) << c.dump();
  }
  fs::copy_file("/bin/ls", checkout_ / "build/libhost.so", fs::copy_options::overwrite_existing);
  const json changed = pull_request(host, host, 0);
  for (const json& c : changed["cases"]) {
    EXPECT_TRUE(c.contains("base_measurements")) << c.dump();
    EXPECT_EQ(c["changed_from_base"]["differs"], json({"the host code of build/libhost.so"})) << c.dump();
  }
  EXPECT_EQ(changed["stages"][5]["details"]["fake"]["fingerprints"]["changed"]["fake.scale/n1m"],
            "the host code of build/libhost.so");
}

// The head's fingerprints come from its preflight; the base's from a launch
// pass of its own.
TEST_F(FingerprintTest, TheHeadsFingerprintsComeFromItsPreflight) {
  std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  const fs::path calls = checkout_ / "calls.txt";
  setenv("KW_FAKE_CALLS", calls.c_str(), 1);
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}};
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  unsetenv("KW_FAKE_CALLS");
  ASSERT_NO_THROW(common::parse_run_report(report));
  for (const json& c : report["cases"]) {
    EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
    EXPECT_TRUE(c.contains("correctness")) << "the preflight's parts stay";
  }
  std::ifstream in(calls);
  std::vector<std::string> stages;
  for (std::string line; std::getline(in, line);) stages.push_back(line);
  // The head's preflight (launch_geometry and correctness), its listing, the
  // base's launch pass: nothing timed, not even by quick_bench.
  EXPECT_EQ(stages, (std::vector<std::string>{"preflight", "", "launch_geometry"}));
}

// A base's fingerprints are a commit's: the next pull request on the same
// base takes them from the agent's cache, with no launch pass of the base.
TEST_F(FingerprintTest, TheBasesFingerprintsAreKeptForTheNextPullRequestOnIt) {
  std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  const fs::path calls = checkout_ / "calls.txt", cache = checkout_ / "fingerprint-cache";
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}};
  setenv("KW_FAKE_CALLS", calls.c_str(), 1);
  for (int job = 0; job < 2; ++job) {
    PipelineOptions options = ab_options(base_);
    options.only_stages = {common::StageName::full_bench};
    options.fingerprint_cache_dir = cache;
    const json report = run_pipeline(parse_repo_config(config), options);
    for (const json& c : report["cases"]) EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
  }
  unsetenv("KW_FAKE_CALLS");
  std::ifstream in(calls);
  int launch_passes = 0;
  for (std::string line; std::getline(in, line);) launch_passes += line == "launch_geometry";
  EXPECT_EQ(launch_passes, 3) << "the head's twice, the base's once";
  EXPECT_NE(log_.find("fingerprints of base bbbbbbbbbbbb kept from an earlier job"), std::string::npos)
      << log_;
}

// A bench the build did not write (or wrote elsewhere) fails load with that
// cause in the headline, for every format.

// Without libkw_inject.so, kw says so once at the start, with where it
// looked, and a pass that fingerprinted nothing names that as the reason,
// not "the launch pass passed".
TEST(InjectLibrary, ItsAbsenceIsSaidWithWhereItWasLookedForAndNamedAsTheReason) {
  setenv("KW_INJECT_LIBRARY", "/nonexistent/libkw_inject.so", 1);
  EXPECT_EQ(
      inject_library_line(),
      "libkw_inject.so not found (looked for /nonexistent/libkw_inject.so; KW_INJECT_LIBRARY names it): "
      "launch_geometry cannot record launches, and no case is fingerprinted, so none is skipped as "
      "identical to its base");
  BenchResult passed;
  passed.message = "attention: 7 cases passed";
  passed.cases = json::array({{{"name", "a"}}});
  EXPECT_EQ(fingerprints_of(passed).whole, json({{"unknown",
                                                  "libkw_inject.so was not found, so no launch was "
                                                  "recorded"}}));
  setenv("KW_INJECT_LIBRARY", KW_FAKE_BENCH, 1);  // any file that exists
  EXPECT_EQ(inject_library_line(), std::string("launch recording: ") + KW_FAKE_BENCH);
  EXPECT_EQ(fingerprints_of(passed).whole, json({{"unknown", "the launch pass recorded no launch"}}));
  passed.status = "failed";
  EXPECT_EQ(fingerprints_of(passed).whole,
            json({{"unknown", "the launch pass failed: attention: 7 cases passed"}}));
  unsetenv("KW_INJECT_LIBRARY");
}

}  // namespace
}  // namespace kw::agent
