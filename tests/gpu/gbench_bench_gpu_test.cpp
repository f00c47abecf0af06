// kw run over a Google Benchmark bench on a GPU: the harness's self-test
// kernels, correct and broken on purpose (kernels/harness/tests/gbench),
// fail the stages they fail through kwbench. gbench has no quick_bench (its
// stage is skipped saying so), so the 10x slower variant has no counterpart
// here. The bench is built where Google Benchmark is installed and carried
// to the GPU machine (tools/stage-gbench-selftest.sh):
// KW_SELFTEST_GBENCH_DIR names the directory.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/kw_run.hpp"

namespace {

using kw::testing::stage_of;
using nlohmann::json;

class GbenchGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
    const char* dir = std::getenv("KW_SELFTEST_GBENCH_DIR");
    if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/kw-selftest-gbench"))
      GTEST_SKIP() << "no Google Benchmark self-test bench carried here (KW_SELFTEST_GBENCH_DIR)";
    dir_ = dir;
  }
  void TearDown() override { unsetenv("LD_LIBRARY_PATH"); }

  // A bench of one benchmark of the self-test bench, held to the scale
  // kernel's launch, checked by the binary's --kw-check of that variant.
  json bench(const std::string& variant, const std::string& filter) const {
    return {{"name", variant},
            {"path", dir_ + "/kw-selftest-gbench"},
            {"format", "gbench"},
            {"args", {"--benchmark_filter=^" + filter + "/", "--benchmark_repetitions=3"}},
            {"launches",
             {{{"kernel", "kwbench_selftest::scale*"},
               {"block", {384}},
               {"max_registers", 64},
               {"max_shared_bytes", 0}}}},
            {"check", {{"command", {dir_ + "/kw-selftest-gbench", "--kw-check", variant}}}}};
  }
  json run(const std::vector<json>& benches, const std::string& stages) const {
    return kw::testing::kw_run_report(
        {{"project", "gbench-gpu"}, {"build", {{"commands", {"true"}}}}, {"benches", json(benches)}}, stages);
  }

  std::string dir_;
};

TEST_F(GbenchGpuTest, CorrectKernelsPassEveryStage) {
  const json report =
      run({bench("ok", "scale/ok")}, "load,launch_geometry,correctness,quick_bench,full_bench");
  for (const char* name : {"load", "launch_geometry", "correctness", "full_bench"})
    EXPECT_EQ(stage_of(report, name)["status"], "passed") << stage_of(report, name);
  EXPECT_EQ(stage_of(report, "quick_bench")["status"], "skipped");
  EXPECT_NE(stage_of(report, "load")["message"].get<std::string>().find(
                "file(s) with kernels for compute capability"),
            std::string::npos)
      << stage_of(report, "load")["message"];
  ASSERT_EQ(report["cases"].size(), 1u) << report["cases"];
  // Replicates, a process each, of the bench's 3 repetitions.
  const json& measured = report["cases"][0]["measurements"][0];
  const std::size_t replicates = measured["replicates"].get<std::set<int>>().size();
  EXPECT_GE(replicates, 4u) << measured;
  EXPECT_EQ(measured["samples_ns"].size(), 3 * replicates);
}

TEST_F(GbenchGpuTest, MissingTemplateInstantiationFailsLoad) {
  setenv("LD_LIBRARY_PATH", (dir_ + "/missing-instantiation").c_str(), 1);
  const json report = run({bench("ok", "scale/ok")}, "load");
  const json load = stage_of(report, "load");
  EXPECT_EQ(load["status"], "failed") << load;
  EXPECT_NE(load["message"].get<std::string>().find("undefined symbol"), std::string::npos)
      << load["message"];
  // Nothing was measured, and the run is still this host's GPU's.
  ASSERT_TRUE(report.contains("device")) << "a failed run records the host's GPU";
  EXPECT_NE(report["device"].value("name", std::string()).find("NVIDIA"), std::string::npos)
      << report["device"];
  EXPECT_TRUE(report["device"].contains("compute_capability")) << report["device"];
}

TEST_F(GbenchGpuTest, OldKernelGeometryFailsLaunchGeometry) {
  const json stage =
      stage_of(run({bench("block128", "scale/block128")}, "launch_geometry"), "launch_geometry");
  EXPECT_EQ(stage["status"], "failed") << stage;
  EXPECT_NE(stage["message"].get<std::string>().find("block (128,1,1), expected (384,1,1)"),
            std::string::npos)
      << stage["message"];
}

TEST_F(GbenchGpuTest, SharedMemoryOverTheLimitFailsWithTheNumbers) {
  json smem = bench("ok", "big_smem");
  smem["launches"] = json::array({{{"kernel", "*big_smem_kernel*"}}});
  const json stage = stage_of(run({smem}, "launch_geometry"), "launch_geometry");
  EXPECT_EQ(stage["status"], "failed") << stage;
  EXPECT_NE(
      stage["message"].get<std::string>().find("163840 bytes of dynamic shared memory asked, 49152 allowed"),
      std::string::npos)
      << stage["message"];
}

TEST_F(GbenchGpuTest, CorrectnessCatchesUnwrittenNaNAndFaultsPerBench) {
  const json stage = stage_of(run({bench("unwritten", "scale/unwritten"), bench("nan", "scale/nan"),
                                   bench("fault", "scale/fault"), bench("ok", "scale/ok")},
                                  "correctness"),
                              "correctness");
  EXPECT_EQ(stage["status"], "failed") << stage;
  const std::string message = stage["message"];
  EXPECT_NE(message.find("unwritten: check `"), std::string::npos) << message;
  EXPECT_NE(message.find("nan: check `"), std::string::npos) << message;
  EXPECT_NE(message.find("fault: check `"), std::string::npos) << message;
  EXPECT_NE(message.find("ok: check `" + dir_ + "/kw-selftest-gbench` passed"), std::string::npos) << message;
  const std::string tail = stage["log_tail"];
  EXPECT_NE(tail.find("unwritten: 8388608 non-finite outputs"), std::string::npos) << tail;
  EXPECT_NE(tail.find("nan: 16777216 non-finite outputs"), std::string::npos) << tail;
  EXPECT_NE(tail.find("illegal memory access"), std::string::npos) << tail;
}

}  // namespace
