// kw run's sanitize option on a real bench: the harness's broken bench has a
// case whose outputs are right but which writes one element past its output
// (broken.overrun). Its correctness stage passes on its own; with memcheck
// asked for in kernelwatch.json it fails, quoting the sanitizer's report.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/subprocess.hpp"
#include "../support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool has_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The correctness stage of `kw run` over a repository whose bench is the
// broken bench, restricted to `cases`, with memcheck.
json correctness_of(const std::string& cases) {
  const fs::path repo = kw::testing::make_temp_dir("kw-sanitize-repo");
  fs::create_symlink(KW_BROKEN_BENCH, repo / "bench");
  json config{
      {"project", "sanitize"},
      {"build", {{"commands", {"true"}}}},
      {"benches",
       {{{"name", "broken"}, {"path", "bench"}, {"cases", cases}, {"sanitize", {{"tools", {"memcheck"}}}}}}}};
  std::ofstream(repo / "kernelwatch.json") << config.dump(2);
  kw::testing::run_command({"git", "-C", repo.string(), "init", "-q"});
  kw::testing::run_command({"git", "-C", repo.string(), "add", "-A"});
  kw::testing::run_command({"git", "-C", repo.string(), "-c", "user.name=kw", "-c", "user.email=kw@localhost",
                            "commit", "-qm", "bench"});
  const fs::path out = repo / "report.json";
  auto result = kw::testing::run_command(
      {KW_BINARY, "run", "--repo", repo.string(), "--stages", "correctness", "--out", out.string()});
  json report = json::parse(std::ifstream(out));
  fs::remove_all(repo);
  for (const json& stage : report["stages"])
    if (stage["name"] == "correctness") return stage;
  ADD_FAILURE() << "no correctness stage: " << result.output;
  return {};
}

TEST(SanitizeGpuTest, MemcheckFailsCorrectnessOnAWritePastTheEndThatTheOutputsDoNotShow) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  const json clean = correctness_of("broken.ok");
  EXPECT_EQ(clean["status"], "passed") << clean;
  EXPECT_NE(clean["message"].get<std::string>().find("memcheck: no errors"), std::string::npos)
      << clean["message"];

  const json overrun = correctness_of("broken.overrun");
  EXPECT_EQ(overrun["status"], "failed") << overrun;
  const std::string message = overrun["message"];
  EXPECT_NE(message.find("1 cases passed"), std::string::npos) << "its outputs are right: " << message;
  EXPECT_NE(message.find("memcheck found errors: Invalid __global__ write of size 4 bytes"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scale_overrun_kernel"), std::string::npos) << message;
}

}  // namespace
