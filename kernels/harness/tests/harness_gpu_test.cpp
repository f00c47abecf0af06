// The harness on a real GPU: every stage passes on correct kernels, and each
// deliberately broken kernel fails the stage that exists to catch it, with a
// message that says why. Skipped where there is no CUDA device.
#include <cuda_runtime.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <gtest/gtest.h>

#include "../../../tests/support/subprocess.hpp"
#include "kw/common/run_report.hpp"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class HarnessGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  }

  // Runs a bench stage; returns its JSON document.
  json stage(const std::string& bench, const std::string& stage_name, std::vector<std::string> extra = {}) {
    fs::path out =
        fs::temp_directory_path() / ("kwbench-test-" + std::to_string(getpid()) + "-" + stage_name + ".json");
    std::vector<std::string> argv = {bench, "--stage", stage_name, "--json", out.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    last_ = kw::testing::run_command(argv);
    std::ifstream in(out);
    EXPECT_TRUE(in.good()) << "no JSON written\n" << last_.output;
    json document = in ? json::parse(in) : json::object();
    if (in) expect_stage_schema(out);
    fs::remove(out);
    return document;
  }

  // The document is what kernels/stage.schema.json says, as kwbench.py's
  // are (kernels/python/tests): one protocol, two harnesses.
  static void expect_stage_schema(const fs::path& document) {
    const kw::testing::CommandResult check =
        kw::testing::run_command({"python3", KW_SOURCE_DIR "/tests/support/json_schema.py",
                                  KW_SOURCE_DIR "/kernels/stage.schema.json", document.string()});
    EXPECT_EQ(check.exit_code, 0) << check.output;
  }

  static json case_named(const json& document, const std::string& name) {
    for (const json& c : document["stage"]["details"]["cases"]) {
      if (c["name"] == name) return c;
    }
    ADD_FAILURE() << "no case " << name << " in " << document.dump().substr(0, 400);
    return json::object();
  }

  kw::testing::CommandResult last_;
};

TEST_F(HarnessGpuTest, CorrectKernelsPassEveryStageAndMakeAValidReport) {
  json report{{"schema", "kernelwatch.run/1"},
              {"project", "kernelwatch"},
              {"commit", std::string(40, 'a')},
              {"branch", "main"},
              {"agent", {{"name", "gpu-test"}, {"version", "0.1.0"}}},
              {"started_at", "2026-11-21T10:00:00Z"},
              {"finished_at", "2026-11-21T10:10:00Z"},
              {"gpu_seconds", 1.0},
              {"stages", json::array({{{"name", "build"}, {"status", "passed"}, {"duration_ms", 0}}})},
              {"cases", json::array()}};
  std::map<std::string, json> cases;
  for (const char* name : {"load", "launch_geometry", "correctness", "quick_bench", "full_bench"}) {
    std::vector<std::string> extra = {"--case", "selftest.scale/n33554432"};
    if (std::string(name) == "load") extra = {"--library", KW_GOOD_LIBRARY, "--symbol", "kw_selftest_entry"};
    if (std::string(name) == "full_bench") extra.insert(extra.end(), {"--max-seconds", "2"});
    json document = stage(KW_SELFTEST_BENCH, name, extra);
    EXPECT_EQ(document["stage"]["status"], "passed") << name << ": " << document["stage"]["message"] << "\n"
                                                     << last_.output;
    EXPECT_EQ(last_.exit_code, 0) << name;
    report["device"] = document["device"];
    report["stages"].push_back(document["stage"]);
    for (const json& c : document["cases"]) cases[c["name"]].update(c);
  }
  for (auto& [_, c] : cases) report["cases"].push_back(c);
  ASSERT_EQ(report["cases"].size(), 1u);
  json c = report["cases"][0];
  EXPECT_EQ(c["launches"][0]["block"], json({384, 1, 1}));
  EXPECT_TRUE(c["correctness"]["passed"].get<bool>());
  EXPECT_EQ(c["measurements"][0]["impl"], "candidate");
  EXPECT_EQ(c["measurements"][1]["impl"], "baseline:memcpy");
  EXPECT_GE(c["measurements"][0]["samples_ns"].size(), 10u);
  EXPECT_GT(c["measurements"][0]["peak_mem_bytes"].get<std::int64_t>(), 2 * (std::int64_t{1} << 25) * 4 - 1);
  // The stages' outputs assemble into a report the server accepts.
  EXPECT_NO_THROW(kw::common::parse_run_report(report)) << report.dump().substr(0, 2000);
}

// Energy per iteration from NVML's counter: the scale kernel streams 8 bytes
// an element, so eight times the elements costs about eight times the
// joules; each implementation's joules are its average power times its
// time. Where NVML cannot read energy the fields are absent, and the stage
// says why.
TEST_F(HarnessGpuTest, EnergyPerIterationFollowsTheWork) {
  std::map<std::string, json> candidates;
  for (const char* name : {"selftest.scale/n33554432", "selftest.scale/n268435456"}) {
    json document = stage(KW_SELFTEST_BENCH, "full_bench",
                          {"--case", name, "--max-seconds", "0.5", "--energy-seconds", "0.2"});
    ASSERT_EQ(document["stage"]["status"], "passed") << last_.output;
    ASSERT_EQ(document["cases"].size(), 1u) << last_.output;
    json c = document["cases"][0];
    if (!c["measurements"][0].contains("energy_j")) {
      json details = case_named(document, name).value("details", json::object());
      ASSERT_TRUE(details.contains("energy") || details.contains("nvml")) << c.dump().substr(0, 1500);
      GTEST_SKIP() << "NVML reads no energy here: " << details.value("energy", details.value("nvml", ""));
    }
    for (const json& m : c["measurements"]) {
      ASSERT_TRUE(m.contains("energy_j")) << m["impl"];
      const double joules = m["energy_j"][0], watts = m["power_w"][0];
      const double seconds = m["median_ns"].get<double>() * 1e-9;
      EXPECT_GT(watts, 30) << m["impl"];
      EXPECT_LT(watts, 1500) << m["impl"];
      EXPECT_EQ(m["energy_replicates"], json::array({0}));
      // The energy window runs without the timed rounds' L2 flush: within 40%.
      EXPECT_NEAR(joules / (watts * seconds), 1.0, 0.4) << m["impl"] << " " << m.dump().substr(0, 300);
    }
    candidates[name] = c["measurements"][0];
    // The single process's measurement is already a report's.
    EXPECT_NO_THROW(kw::common::parse_run_report(json{{"schema", "kernelwatch.run/1"},
                                                      {"project", "p"},
                                                      {"commit", std::string(40, 'a')},
                                                      {"branch", "main"},
                                                      {"agent", {{"name", "gpu-test"}, {"version", "0.1.0"}}},
                                                      {"device", document["device"]},
                                                      {"started_at", "2026-11-24T10:00:00Z"},
                                                      {"finished_at", "2026-11-24T10:10:00Z"},
                                                      {"gpu_seconds", 1.0},
                                                      {"stages", json::array({document["stage"]})},
                                                      {"cases", document["cases"]}}))
        << c.dump().substr(0, 1500);
  }
  const double ratio = candidates["selftest.scale/n268435456"]["energy_j"][0].get<double>() /
                       candidates["selftest.scale/n33554432"]["energy_j"][0].get<double>();
  EXPECT_GT(ratio, 5.0) << "8x the elements";
  EXPECT_LT(ratio, 11.0) << "8x the elements";
  std::cout << "energy per iteration: n33554432 " << candidates["selftest.scale/n33554432"]["energy_j"]
            << " J, n268435456 " << candidates["selftest.scale/n268435456"]["energy_j"] << " J (x" << ratio
            << "), power " << candidates["selftest.scale/n268435456"]["power_w"] << " W\n";
}

TEST_F(HarnessGpuTest, MissingTemplateInstantiationFailsLoad) {
  json document =
      stage(KW_SELFTEST_BENCH, "load", {"--library", KW_BROKEN_LIBRARY, "--symbol", "kw_selftest_entry"});
  EXPECT_EQ(document["stage"]["status"], "failed");
  EXPECT_EQ(last_.exit_code, 1);
  std::string message = document["stage"]["message"];
  EXPECT_NE(message.find("RTLD_NOW) failed"), std::string::npos) << message;
  EXPECT_NE(message.find("undefined symbol: _Z12launch_scaleILi3EEvPKfPfmP11CUstream_st"), std::string::npos)
      << message;
}

TEST_F(HarnessGpuTest, SharedMemoryOverTheLimitFailsLoadWithTheNumbers) {
  json document = stage(KW_SMEM_BENCH, "load");
  EXPECT_EQ(document["stage"]["status"], "failed");
  EXPECT_EQ(
      document["stage"]["message"],
      "kernel big_smem_kernel: asks for 160.0 KiB of dynamic shared memory but is allowed 48.0 KiB (raise it "
      "with cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize); this device allows up to "
      "227.0 "
      "KiB)");
}

TEST_F(HarnessGpuTest, OldKernelGeometryFailsLaunchGeometry) {
  json document = stage(KW_BROKEN_BENCH, "launch_geometry", {"--case", "broken.block128"});
  EXPECT_EQ(document["stage"]["status"], "failed");
  json c = case_named(document, "broken.block128");
  EXPECT_EQ(c["status"], "failed");
  EXPECT_EQ(
      c["message"],
      "block: expected (384,1,1), observed (128,1,1) (kwbench_selftest::scale_kernel(float const*, float*, "
      "float, unsigned long))");
  EXPECT_EQ(document["cases"][0]["launches"][0]["block"], json({128, 1, 1}));
}

TEST_F(HarnessGpuTest, CorrectnessCatchesUnwrittenNaNAndFaultsPerCase) {
  json document = stage(KW_BROKEN_BENCH, "correctness",
                        {"--case", "broken.[ounf]*"});  // ok, unwritten, nan, fault, overrun
  EXPECT_EQ(document["stage"]["status"], "failed");
  EXPECT_EQ(case_named(document, "broken.overrun")["status"], "passed")
      << "its outputs are right; only a sanitizer sees its write past the end "
         "(agent/tests/sanitize_gpu_test.cpp)";
  EXPECT_EQ(case_named(document, "broken.ok")["status"], "passed")
      << "a fault elsewhere must not fail this case";
  json unwritten = case_named(document, "broken.unwritten");
  EXPECT_EQ(unwritten["status"], "failed");
  EXPECT_EQ(unwritten["message"],
            "8388608 output values are NaN/Inf (unwritten outputs keep the NaN poison)");
  json nan = case_named(document, "broken.nan");
  EXPECT_EQ(nan["status"], "failed");
  EXPECT_NE(nan["message"].get<std::string>().find("output values are NaN/Inf"), std::string::npos);
  json fault = case_named(document, "broken.fault");
  EXPECT_EQ(fault["status"], "failed");
  EXPECT_NE(fault["message"].get<std::string>().find("cudaErrorIllegalAddress"), std::string::npos)
      << fault["message"];
}

TEST_F(HarnessGpuTest, TenTimesSlowerFailsQuickBench) {
  json document = stage(KW_BROKEN_BENCH, "quick_bench", {"--case", "broken.slow"});
  EXPECT_EQ(document["stage"]["status"], "failed");
  std::string message = case_named(document, "broken.slow")["message"];
  EXPECT_NE(message.find("x of baseline:memcpy"), std::string::npos) << message;
  EXPECT_NE(message.find("its sanity range is 0.5x..4x"), std::string::npos) << message;
}

// --stage preflight: the per-case stages of a case on one setup of it, in
// one process; each stage kept apart in the document, as the agent reports them.
TEST_F(HarnessGpuTest, PreflightRunsLoadAndEveryPerCaseStageInOneGo) {
  json document = stage(
      KW_SELFTEST_BENCH, "preflight",
      {"--case", "selftest.scale/n33554432", "--library", KW_GOOD_LIBRARY, "--symbol", "kw_selftest_entry"});
  EXPECT_EQ(last_.exit_code, 0) << last_.output;
  ASSERT_EQ(document["preflight"].size(), 4u) << document.dump().substr(0, 2000);
  std::vector<std::string> names;
  for (const json& entry : document["preflight"]) {
    names.push_back(entry["stage"]["name"]);
    EXPECT_EQ(entry["stage"]["status"], "passed") << entry["stage"]["message"];
    EXPECT_GE(entry["stage"]["duration_ms"].get<std::int64_t>(), 0);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"load", "launch_geometry", "correctness", "quick_bench"}));
  EXPECT_EQ(document["preflight"][1]["cases"][0]["launches"][0]["block"], json({384, 1, 1}));
  EXPECT_TRUE(document["preflight"][2]["cases"][0]["correctness"]["passed"].get<bool>());
  EXPECT_TRUE(document["device"].contains("name"));
}

// A failed stage skips the stages after it for every case, and still runs
// for the cases after the one that failed it; a faulting case ends its
// process, and a fresh one continues at the next case.
TEST_F(HarnessGpuTest, PreflightStopsAfterAFailedStageAndIsolatesAFault) {
  json document = stage(KW_BROKEN_BENCH, "preflight", {"--case", "broken.ok,broken.unwritten"});
  EXPECT_EQ(last_.exit_code, 1);
  ASSERT_EQ(document["preflight"].size(), 3u)
      << "quick_bench is not run: " << document.dump().substr(0, 2000);
  EXPECT_EQ(document["preflight"][1]["stage"]["status"], "passed");
  const json& correctness = document["preflight"][2]["stage"];
  EXPECT_EQ(correctness["status"], "failed");
  ASSERT_EQ(correctness["details"]["cases"].size(), 2u);
  EXPECT_EQ(correctness["details"]["cases"][0]["status"], "passed");
  EXPECT_EQ(correctness["details"]["cases"][1]["message"],
            "8388608 output values are NaN/Inf (unwritten outputs keep the NaN poison)");

  document = stage(KW_BROKEN_BENCH, "preflight", {"--case", "broken.fault,broken.ok"});
  std::map<std::string, std::string> fault, ok;  // stage -> status
  std::string fault_message;
  for (const json& entry : document["preflight"]) {
    for (const json& c : entry["stage"]["details"].value("cases", json::array())) {
      if (c["name"] == "broken.fault") {
        fault[entry["stage"]["name"]] = c["status"];
        if (c["status"] == "failed") fault_message = c["message"];
      }
      if (c["name"] == "broken.ok") ok[entry["stage"]["name"]] = c["status"];
    }
  }
  EXPECT_NE(fault_message.find("cudaErrorIllegalAddress"), std::string::npos)
      << document.dump().substr(0, 3000);
  EXPECT_FALSE(ok.empty()) << "the case after the fault ran";
  for (const auto& [stage_name, status] : ok) EXPECT_EQ(status, "passed") << stage_name;
}

TEST_F(HarnessGpuTest, ListAndUnknownCase) {
  auto listed = kw::testing::run_command({KW_BROKEN_BENCH, "--list"});
  EXPECT_EQ(listed.exit_code, 0);
  EXPECT_NE(listed.output.find("broken.block128\n"), std::string::npos);
  const fs::path list_json =
      fs::temp_directory_path() / ("kwbench-test-" + std::to_string(getpid()) + "-list.json");
  EXPECT_EQ(kw::testing::run_command({KW_BROKEN_BENCH, "--list", "--json", list_json.string()}).exit_code, 0);
  expect_stage_schema(list_json);
  fs::remove(list_json);
  json document = stage(KW_BROKEN_BENCH, "correctness", {"--case", "nothing*"});
  EXPECT_EQ(document["stage"]["message"], "no case matches \"nothing*\"");
}

}  // namespace
