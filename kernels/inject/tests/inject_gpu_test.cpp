// libkw_inject.so against kwbench's own CUPTI capture: the attention bench's
// launch_geometry stage records the candidate's launches in-process; the
// same cases run under the injection library (the correctness stage, in
// child processes, so the per-process files are exercised too) must show
// the same kernels with the same grid, block, registers and shared memory.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../../tests/support/subprocess.hpp"
#include "../../../tests/support/temp_dir.hpp"

namespace {

using nlohmann::json;
using Launch = std::tuple<std::string, json, json, int, std::int64_t, std::int64_t>;

bool has_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Launch key_of(const json& launch) {
  return {launch["kernel"],    launch["grid"],        launch["block"],
          launch["registers"], launch["static_smem"], launch["dynamic_smem"]};
}

constexpr const char* kCases =
    "attention/fp16/d64/b1h1s512,attention/bf16/d64/b2h4s128/causal,attention/fp16/d128/b8h16s2048/causal";

TEST(InjectGpuTest, TheInjectionLibraryReportsTheLaunchesKwbenchCaptures) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-inject");
  const std::string own = (dir / "launch_geometry.json").string();
  auto traced = kw::testing::run_command(
      {KW_ATTENTION_BENCH, "--stage", "launch_geometry", "--case", kCases, "--in-process", "--json", own});
  ASSERT_EQ(traced.exit_code, 0) << traced.output;
  std::multiset<Launch> expected;
  const json traced_report = json::parse(std::ifstream(own));
  for (const json& c : traced_report["cases"])
    for (const json& launch : c["launches"]) expected.insert(key_of(launch));
  ASSERT_EQ(expected.size(), 3u) << "one candidate launch per case";

  const std::filesystem::path records = dir / "records";
  std::filesystem::create_directories(records);
  setenv("CUDA_INJECTION64_PATH", KW_INJECT_LIBRARY, 1);
  setenv("KW_INJECT_OUT", records.c_str(), 1);
  auto injected = kw::testing::run_command(
      {KW_ATTENTION_BENCH, "--stage", "correctness", "--case", kCases, "--json", (dir / "c.json").string()});
  unsetenv("CUDA_INJECTION64_PATH");
  unsetenv("KW_INJECT_OUT");
  ASSERT_EQ(injected.exit_code, 0) << injected.output;

  std::multiset<Launch> observed;
  int processes = 0, ended = 0, all_launches = 0;
  for (const auto& file : std::filesystem::directory_iterator(records)) {
    ++processes;
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      json record = json::parse(line);
      ASSERT_FALSE(record.contains("error")) << file.path() << ": " << line;
      if (record.contains("end")) {
        ++ended;
        EXPECT_EQ(record["end"]["dropped"], 0) << line;
      } else if (record.contains("kernel")) {
        ++all_launches;
        if (record["kernel"].get<std::string>().find("attention_forward_kernel") != std::string::npos)
          observed.insert(key_of(record));
      }
    }
  }
  std::filesystem::remove_all(dir);
  EXPECT_GE(processes, 2) << "the bench and its case process each write their own file";
  EXPECT_EQ(ended, processes) << "every process exited normally and said so";
  EXPECT_GT(all_launches, static_cast<int>(observed.size())) << "the inputs' and the reference's kernels too";
  EXPECT_EQ(observed, expected);
}

// The fingerprints' inputs, as the agent takes them from a kwbench bench:
// the library beside kwbench's own launch tracing (KW_INJECT_LAUNCHES=0),
// every module digested per kernel as loaded, the launched kernels among
// them, the same digests on a second run, and the files mapped.
TEST(InjectGpuTest, EveryLoadedModuleIsDigestedPerKernelBesideKwbenchsOwnTrace) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-inject-modules");
  auto run_once = [&](const std::string& tag, std::set<std::string>& launched) {
    const std::filesystem::path records = dir / tag;
    std::filesystem::create_directories(records);
    setenv("CUDA_INJECTION64_PATH", KW_INJECT_LIBRARY, 1);
    setenv("KW_INJECT_OUT", records.c_str(), 1);
    setenv("KW_INJECT_LAUNCHES", "0", 1);
    // As the agent runs a kwbench bench: its preflight, in child processes.
    const std::string own = (dir / (tag + ".json")).string();
    auto traced = kw::testing::run_command(
        {KW_ATTENTION_BENCH, "--stage", "preflight", "--case", kCases, "--json", own});
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("KW_INJECT_OUT");
    unsetenv("KW_INJECT_LAUNCHES");
    EXPECT_EQ(traced.exit_code, 0) << traced.output;
    const json document = json::parse(std::ifstream(own));
    for (const json& stage : document.value("preflight", json::array())) {
      if (stage["stage"]["name"] != "launch_geometry") continue;
      for (const json& c : stage["cases"])
        for (const json& launch : c.value("launches", json::array())) launched.insert(launch["kernel"]);
    }
    EXPECT_FALSE(launched.empty()) << traced.output << document.dump().substr(0, 4000);
    std::map<std::string, std::string> digests;
    bool mapped_bench = false;
    for (const auto& file : std::filesystem::directory_iterator(records)) {
      std::ifstream in(file.path());
      for (std::string line; std::getline(in, line);) {
        json record = json::parse(line);
        EXPECT_FALSE(record.contains("error")) << line;
        EXPECT_FALSE(record.contains("kernel")) << "launches are kwbench's to trace: " << line;
        if (record.contains("module")) {
          for (const auto& [kernel, digest] : record["module"]["kernels"].items()) {
            EXPECT_EQ(digest.get<std::string>().size(), 64u) << line;
            digests[kernel] = digest;
          }
        }
        if (record.contains("maps"))
          for (const json& path : record["maps"])
            mapped_bench =
                mapped_bench || std::filesystem::equivalent(path.get<std::string>(), KW_ATTENTION_BENCH);
      }
    }
    EXPECT_TRUE(mapped_bench) << "the bench executable is among the mapped files";
    return digests;
  };
  std::set<std::string> launched, again_launched;
  const auto first = run_once("first", launched);
  const auto again = run_once("again", again_launched);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(launched.size(), 3u) << "one kernel per case";
  for (const std::string& kernel : launched) {
    ASSERT_TRUE(first.contains(kernel)) << kernel << " was launched and not seen loaded";
    EXPECT_EQ(first.at(kernel), again.at(kernel)) << kernel;
  }
}

// A launch the driver refuses for its shared memory: the record says what
// was asked and what the kernel allows, where the runtime says only
// "invalid argument".
TEST(InjectGpuTest, ARefusedLaunchIsRecordedWithTheSharedMemoryAskedAndAllowed) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path records = kw::testing::make_temp_dir("kw-inject-refused");
  setenv("CUDA_INJECTION64_PATH", KW_INJECT_LIBRARY, 1);
  setenv("KW_INJECT_OUT", records.c_str(), 1);
  auto run = kw::testing::run_command({KW_OVER_SMEM_LAUNCH});
  unsetenv("CUDA_INJECTION64_PATH");
  unsetenv("KW_INJECT_OUT");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("cudaErrorInvalidValue"), std::string::npos) << run.output;
  std::vector<json> refused;
  for (const auto& file : std::filesystem::directory_iterator(records)) {
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      json record = json::parse(line);
      if (record.contains("failed_launch")) refused.push_back(record["failed_launch"]);
    }
  }
  std::filesystem::remove_all(records);
  ASSERT_EQ(refused.size(), 1u);
  const json& launch = refused[0];
  EXPECT_EQ(launch["kernel"], "tile_kernel(float*)");
  EXPECT_EQ(launch["error"], "CUDA_ERROR_INVALID_VALUE");
  EXPECT_EQ(launch["block"], json({256, 1, 1}));
  EXPECT_EQ(launch["dynamic_smem"], 160 * 1024);
  EXPECT_EQ(launch["max_dynamic_smem"], 48 * 1024);
  EXPECT_EQ(launch["static_smem"], 0);
}

}  // namespace
