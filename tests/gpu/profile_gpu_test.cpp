// `kw profile` on the GPU machine: the attention bench's case under Nsight
// Compute in two commits of a repository made for the test, each side's
// attention kernel with its time, throughput, occupancy and stalls, and the
// raw CSV kept. KW_PROFILE_OUT keeps the output (kernels/run-on-gpu.sh
// brings it back).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/child_process.hpp"
#include "../support/kw_run.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A repository for the test: its bench the attention bench, two commits.
struct TwoCommits {
  fs::path dir;
  std::string base, head;
};
TwoCommits two_commit_repo() {
  TwoCommits repo{kw::testing::make_temp_dir("kw-profile-repo"), {}, {}};
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(),
                {"git", "-C", repo.dir.string(), "-c", "user.name=kw", "-c", "user.email=kw@localhost"});
    return kw::testing::run_command(args);
  };
  json config{{"project", "profile"},
              {"build", {{"commands", {"true"}}}},
              {"benches", {{{"name", "attention"}, {"path", KW_ATTENTION_BENCH}}}}};
  std::ofstream(repo.dir / "kernelwatch.json") << config.dump(2);
  git({"init", "-q"});
  git({"add", "-A"});
  git({"commit", "-qm", "base"});
  repo.base = git({"rev-parse", "HEAD"}).output.substr(0, 40);
  std::ofstream(repo.dir / "README.md") << "head\n";
  git({"add", "-A"});
  git({"commit", "-qm", "head"});
  repo.head = git({"rev-parse", "HEAD"}).output.substr(0, 40);
  return repo;
}

bool has_ncu() {
  return kw::testing::run_command({"sh", "-c", "command -v ncu || test -x /usr/local/cuda/bin/ncu"})
             .exit_code == 0;
}

TEST(ProfileGpuTest, TheAttentionKernelOfBothCommitsIsProfiledWithItsStalls) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
  if (!has_ncu()) GTEST_SKIP() << "no ncu";
  const fs::path repo = two_commit_repo().dir;

  const char* keep = std::getenv("KW_PROFILE_OUT");
  const fs::path out = keep != nullptr ? fs::path(keep) : repo / "out";
  auto result =
      kw::testing::run_command({KW_BINARY, "profile", "--repo", repo.string(), "--base", "HEAD~1", "--case",
                                "attention/fp16/d128/b4h16s4096*", "--kernel", "attention", "--launch-count",
                                "4", "--out", out.string(), "--cache-dir", (repo / "cache").string()});
  std::cout << result.output << std::endl;
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(out / "profile.json");
  const json profile = json::parse(in);
  for (const char* side : {"base", "head"}) {
    const json& kernels = profile[side]["kernels"];
    ASSERT_FALSE(kernels.empty()) << side;
    for (const auto& [name, k] : kernels.items()) {
      EXPECT_NE(name.find("attention"), std::string::npos) << name;
      EXPECT_EQ(k["launches"], 4) << name;
      EXPECT_GT(k["time_us"].get<double>(), 0) << k;
      EXPECT_GT(k["sm_pct"].get<double>(), 0) << k;
      EXPECT_LE(k["sm_pct"].get<double>(), 100) << k;
      EXPECT_GT(k["occupancy_pct"].get<double>(), 0) << k;
      EXPECT_LE(k["occupancy_pct"].get<double>(), 100) << k;
      EXPECT_EQ(k["stalls"].size(), 3u) << k;
    }
    EXPECT_TRUE(fs::exists(out / (std::string(side) + ".csv")));
  }
  std::ifstream table(out / "profile.md");
  std::stringstream text;
  text << table.rdbuf();
  EXPECT_NE(text.str().find("| base "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("| head "), std::string::npos) << text.str();
  fs::remove_all(repo);
}

// A profile job as kw-server hands it out (from a loopback stand-in for
// kw-server: no PostgreSQL here): `kw agent` finds ncu itself, builds both
// commits from its mirror, profiles the case and posts the summary and CSVs.
TEST(ProfileGpuTest, AnAgentRunsAProfileJobAndPostsItsSummary) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
  if (!has_ncu()) GTEST_SKIP() << "no ncu";
  const TwoCommits repo = two_commit_repo();
  const fs::path job = repo.dir / "job.json", record = repo.dir / "record.jsonl";
  std::ofstream(job) << json{
      {"id", 41},
      {"project", "profile"},
      {"commit", repo.head},
      {"base_commit", repo.base},
      {"branch", "main"},
      {"kind", "profile"},
      {"profile",
       {{"id", 7},
        {"run_id", 40},
        {"case", "attention/fp16/d128/b4h16s4096*"},
        {"launch_count", 3},
        {"kernel",
         "attention"}}}}.dump();
  const std::string stand_in_script = std::string(KW_SOURCE_DIR) + "/tests/support/kw_server_stand_in.py";
  kw::testing::ChildProcess stand_in(
      {"/usr/bin/env", "python3", stand_in_script, job.string(), record.string()});
  const std::string port = stand_in.wait_for("^[0-9]+");
  auto result =
      kw::testing::run_command({KW_BINARY, "agent", "--once", "--server", "http://127.0.0.1:" + port,
                                "--token", "stand-in", "--work-dir", (repo.dir / "work").string(), "--repo",
                                "profile=" + repo.dir.string(), "--name", "gpu-profiler"});
  std::cout << result.output << std::endl;
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("profile jobs: "), std::string::npos);
  std::ifstream lines(record);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line)) << "the agent posted nothing";
  const json posted = json::parse(line);
  ASSERT_EQ(posted["path"], "/api/v1/jobs/41/profile") << posted.dump().substr(0, 2000);
  const json& summary = posted["body"]["summary"];
  EXPECT_EQ(summary["base"]["commit"], repo.base);
  EXPECT_EQ(summary["head"]["commit"], repo.head);
  for (const char* side : {"base", "head"}) {
    ASSERT_EQ(summary[side]["kernels"].size(), 1u) << summary.dump(2);
    const json& k = summary[side]["kernels"].begin().value();
    EXPECT_EQ(k["launches"], 3);
    EXPECT_GT(k["time_us"].get<double>(), 0);
    EXPECT_EQ(posted["body"][std::string(side) + "_csv"].get<std::string>().rfind("\"ID\",", 0), 0u);
  }
  if (const char* keep = std::getenv("KW_PROFILE_OUT")) {
    fs::create_directories(keep);
    std::ofstream(fs::path(keep) / "agent-profile-job.json") << posted["body"]["summary"].dump(2);
  }
  stand_in.signal(SIGTERM);
  fs::remove_all(repo.dir);
}

}  // namespace
