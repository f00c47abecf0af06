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

#include "../support/kw_run.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool has_ncu() {
  return kw::testing::run_command({"sh", "-c", "command -v ncu || test -x /usr/local/cuda/bin/ncu"})
             .exit_code == 0;
}

TEST(ProfileGpuTest, TheAttentionKernelOfBothCommitsIsProfiledWithItsStalls) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
  if (!has_ncu()) GTEST_SKIP() << "no ncu";
  const fs::path repo = kw::testing::make_temp_dir("kw-profile-repo");
  auto git = [&](std::vector<std::string> args) {
    args.insert(args.begin(),
                {"git", "-C", repo.string(), "-c", "user.name=kw", "-c", "user.email=kw@localhost"});
    return kw::testing::run_command(args);
  };
  json config{{"project", "profile"},
              {"build", {{"commands", {"true"}}}},
              {"benches", {{{"name", "attention"}, {"path", KW_ATTENTION_BENCH}}}}};
  std::ofstream(repo / "kernelwatch.json") << config.dump(2);
  git({"init", "-q"});
  git({"add", "-A"});
  git({"commit", "-qm", "base"});
  std::ofstream(repo / "README.md") << "head\n";
  git({"add", "-A"});
  git({"commit", "-qm", "head"});

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

}  // namespace
