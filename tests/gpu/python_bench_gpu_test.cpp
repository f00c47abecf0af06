// kw run over Python benches (kernels/python/kwbench.py) on a GPU with
// PyTorch: the harness's self-test kernels, correct and broken on purpose,
// through ctypes (kernels/harness/tests/python/selftest_bench.py) fail the
// same stages as through the C++ self-test bench; the attention kernel
// against torch's SDPA passes every preflight stage, and the dispatch bug of
// DESIGN.md's table fails launch_geometry through Python too.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../support/kw_run.hpp"

namespace {

using kw::testing::stage_of;
using nlohmann::json;

bool has_torch() {
  static const bool found = kw::testing::run_command({"python3", "-c", "import torch"}).exit_code == 0;
  return found;
}

json run_python_bench(const std::string& script, const std::string& cases, const std::string& stages) {
  return kw::testing::kw_run_report(
      {{"project", "python-gpu"},
       {"build", {{"commands", {"true"}}}},
       {"benches", {{{"name", "py"}, {"path", script}, {"format", "python"}, {"cases", cases}}}}},
      stages);
}

class PythonBenchGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
    if (!has_torch()) GTEST_SKIP() << "no PyTorch for python3";
    setenv("KW_SELFTEST_SCALE_LIBRARY", KW_SELFTEST_SCALE_LIBRARY, 1);
    setenv("KW_SELFTEST_LIBRARY", KW_GOOD_LIBRARY, 1);
    setenv("KW_ATTENTION_LIBRARY", KW_ATTENTION_LIBRARY, 1);
  }
  static json selftest(const std::string& cases, const std::string& stages) {
    return run_python_bench(KW_SOURCE_DIR "/kernels/harness/tests/python/selftest_bench.py", cases, stages);
  }
};

TEST_F(PythonBenchGpuTest, CorrectKernelsPassEveryPreflightStage) {
  const json report = selftest("broken.ok", "load,launch_geometry,correctness,quick_bench");
  for (const char* name : {"load", "launch_geometry", "correctness", "quick_bench"})
    EXPECT_EQ(stage_of(report, name)["status"], "passed") << stage_of(report, name);
  EXPECT_FALSE(report["device"]["compute_capability"].get<std::string>().empty()) << report["device"];
  ASSERT_EQ(report["cases"].size(), 1u);
  const json& launches = report["cases"][0]["launches"];
  ASSERT_GE(launches.size(), 1u) << report["cases"][0];
  EXPECT_NE(launches[0]["kernel"].get<std::string>().find("kwbench_selftest::scale_kernel"),
            std::string::npos);
  EXPECT_EQ(launches[0]["block"], json::array({384, 1, 1}));
  // The load stage checked the kernel images of the library ctypes loaded.
  EXPECT_NE(stage_of(report, "load")["message"].get<std::string>().find(
                "py: loaded 1 library; 1 file(s) with kernels for compute capability"),
            std::string::npos)
      << stage_of(report, "load")["message"];
}

TEST_F(PythonBenchGpuTest, MissingTemplateInstantiationFailsLoad) {
  setenv("KW_SELFTEST_LIBRARY", KW_BROKEN_LIBRARY, 1);
  const json load = stage_of(selftest("broken.ok", "load"), "load");
  EXPECT_EQ(load["status"], "failed") << load;
  EXPECT_NE(load["message"].get<std::string>().find("undefined symbol"), std::string::npos)
      << load["message"];
}

TEST_F(PythonBenchGpuTest, OldKernelGeometryFailsLaunchGeometry) {
  const json stage = stage_of(selftest("broken.block128", "launch_geometry"), "launch_geometry");
  EXPECT_EQ(stage["status"], "failed") << stage;
  EXPECT_NE(stage["message"].get<std::string>().find("block (128,1,1), expected (384,1,1)"),
            std::string::npos)
      << stage["message"];
}

TEST_F(PythonBenchGpuTest, SharedMemoryOverTheLimitFailsWithTheNumbers) {
  const json stage = stage_of(selftest("broken.smem", "launch_geometry"), "launch_geometry");
  EXPECT_EQ(stage["status"], "failed") << stage;
  EXPECT_NE(
      stage["message"].get<std::string>().find("163840 bytes of dynamic shared memory asked, 49152 allowed"),
      std::string::npos)
      << stage["message"];
}

TEST_F(PythonBenchGpuTest, CorrectnessCatchesUnwrittenNaNAndFaultsPerCase) {
  const json stage =
      stage_of(selftest("broken.unwritten,broken.nan,broken.fault,broken.ok", "correctness"), "correctness");
  EXPECT_EQ(stage["status"], "failed") << stage;
  const std::string message = stage["message"];
  EXPECT_NE(message.find("3 of 4 cases failed"), std::string::npos) << message;
  EXPECT_NE(message.find("broken.unwritten: 8388608 output values are NaN/Inf"), std::string::npos)
      << message;
  EXPECT_NE(message.find("broken.nan: 16777216 output values are NaN/Inf"), std::string::npos) << message;
  EXPECT_NE(message.find("broken.fault: "), std::string::npos) << message;
  bool ok_passed = false;
  for (const json& c : stage["details"]["py"]["cases"])
    ok_passed |= c["name"] == "broken.ok" && c["status"] == "passed";
  EXPECT_TRUE(ok_passed) << "the case after the fault runs in a fresh process: " << stage["details"];
}

TEST_F(PythonBenchGpuTest, TenTimesSlowerFailsQuickBench) {
  const json stage = stage_of(selftest("broken.slow", "quick_bench"), "quick_bench");
  EXPECT_EQ(stage["status"], "failed") << stage;
  EXPECT_NE(stage["message"].get<std::string>().find("candidate runs at 0.0"), std::string::npos)
      << stage["message"];
}

TEST_F(PythonBenchGpuTest, AttentionAgainstTorchSdpaPassesAndTheDispatchBugFailsLaunchGeometry) {
  const std::string script = KW_SOURCE_DIR "/kernels/attention/python/attention_bench.py";
  const std::string cases = "attention/fp16/d64/b1h1s512,attention/bf16/d128/b8h16s2048/causal";
  const json good = run_python_bench(script, cases, "load,launch_geometry,correctness,quick_bench");
  for (const char* name : {"load", "launch_geometry", "correctness", "quick_bench"})
    EXPECT_EQ(stage_of(good, name)["status"], "passed") << stage_of(good, name);
  // libkw_attention.so, which the extension module loads, is the bench's own: its images are checked.
  EXPECT_NE(stage_of(good, "load")["message"].get<std::string>().find(
                "py: imported kw_attention_torch; 1 file(s) with kernels for compute capability"),
            std::string::npos)
      << stage_of(good, "load")["message"];
  ASSERT_EQ(good["cases"].size(), 2u);
  for (const json& c : good["cases"]) {
    EXPECT_TRUE(c["correctness"]["passed"].get<bool>()) << c;
    EXPECT_FALSE(c["launches"].empty()) << c;
  }

  setenv("KW_ATTENTION_LIBRARY", KW_ATTENTION_DISPATCH_BUG_LIBRARY, 1);
  const json bug = stage_of(run_python_bench(script, cases, "launch_geometry"), "launch_geometry");
  EXPECT_EQ(bug["status"], "failed") << bug;
  const std::string message = bug["message"];
  EXPECT_NE(
      message.find("1 of 2 cases launched otherwise than declared: attention/fp16/d64/b1h1s512: no launch of "
                   "a kernel matching"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("ForwardTraits<64, 128, 64"), std::string::npos)
      << "names what it launched: " << message;
}

}  // namespace
