// `kw gpu-check`, the health check each `kw agent` worker runs on its GPU
// between jobs, on the GPU machine: every GPU there passes (a context that
// runs a kernel, the SM clock under it against the application clock, ECC),
// and a GPU that CUDA cannot see fails the context check with the reason.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/kw_run.hpp"
#include "kw/common/subprocess.hpp"

namespace {

using nlohmann::json;

// `kw gpu-check ARGS` with `env` added; its exit code and JSON result.
std::pair<int, json> gpu_check(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  kw::common::ChildSpec spec;
  spec.argv = {KW_BINARY, "gpu-check", "--json"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::move(env);
  spec.timeout_s = 120;
  kw::common::ChildOutcome outcome = kw::common::run_child(spec);
  std::string out = outcome.output_tail;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const auto newline = out.rfind('\n');
  json result = json::parse(newline == std::string::npos ? out : out.substr(newline + 1), nullptr, false);
  EXPECT_FALSE(result.is_discarded()) << outcome.output_tail;
  return {outcome.exit_code, result};
}

TEST(GpuCheckGpuTest, EveryGpuOfTheHostPassesItsHealthChecks) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
  auto [exit_code, result] = gpu_check({});
  json gpus = result.is_array() ? result : json::array({result});
  ASSERT_GE(gpus.size(), 1u);
  for (const json& gpu : gpus) {
    // The figures go to the log: docs/PERFORMANCE.md quotes them.
    std::cout << gpu.dump(2) << std::endl;
    EXPECT_EQ(gpu["healthy"], true) << gpu.dump(2);
    ASSERT_EQ(gpu["checks"].size(), 3u);
    EXPECT_EQ(gpu["checks"][0]["name"], "cuda_context");
    EXPECT_EQ(gpu["checks"][1]["name"], "clocks");
    EXPECT_EQ(gpu["checks"][2]["name"], "ecc");
    EXPECT_NE(gpu["checks"][0]["message"].get<std::string>().find("kernel launches"), std::string::npos);
    EXPECT_EQ(gpu["uuid"].get<std::string>().rfind("GPU-", 0), 0u) << gpu["uuid"];
  }
  EXPECT_EQ(exit_code, 0);
}

TEST(GpuCheckGpuTest, AGpuCudaCannotSeeFailsTheContextCheckWithTheReason) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
  auto [listed, all] = gpu_check({});
  const std::string uuid = (all.is_array() ? all[0] : all)["uuid"];
  // The worker's view of a GPU that fell off the bus: its UUID, which CUDA
  // no longer enumerates.
  auto [exit_code, result] = gpu_check(
      {"--pinned", "--gpu", uuid}, {{"CUDA_VISIBLE_DEVICES", "GPU-00000000-0000-0000-0000-000000000000"}});
  std::cout << result.dump(2) << std::endl;
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(result["healthy"], false);
  EXPECT_EQ(result["checks"][0]["name"], "cuda_context");
  EXPECT_EQ(result["checks"][0]["passed"], false);
  const std::string message = result["checks"][0]["message"];
  EXPECT_TRUE(message.find("CUDA sees no device") != std::string::npos ||
              message.find("CUDA_ERROR_NO_DEVICE") != std::string::npos)
      << message;
  EXPECT_EQ(result["checks"][1]["passed"], false) << "no clock is read without a context";
}

}  // namespace
