// kw run's sanitize option on a real bench: the harness's broken bench has a
// case whose outputs are right but which writes one element past its output
// (broken.overrun). Its correctness stage passes on its own; with memcheck
// asked for in kernelwatch.json it fails, quoting the sanitizer's report.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../support/kw_run.hpp"

namespace {

using nlohmann::json;

// The correctness stage of `kw run` over a repository whose bench is the
// broken bench, restricted to `cases`, with memcheck.
json correctness_of(const std::string& cases) {
  json config{{"project", "sanitize"},
              {"build", {{"commands", {"true"}}}},
              {"benches",
               {{{"name", "broken"},
                 {"path", KW_BROKEN_BENCH},
                 {"cases", cases},
                 {"sanitize", {{"tools", {"memcheck"}}}}}}}};
  return kw::testing::stage_of(kw::testing::kw_run_report(config, "correctness"), "correctness");
}

TEST(SanitizeGpuTest, MemcheckFailsCorrectnessOnAWritePastTheEndThatTheOutputsDoNotShow) {
  if (!kw::testing::has_cuda_device()) GTEST_SKIP() << "no CUDA device";
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
