// `kw validate` as a user runs it: a real process on real files.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../../tests/support/broken_reports.hpp"
#include "../../tests/support/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using kw::testing::run_command;

TEST(ValidateCommand, AcceptsTheExampleReport) {
  auto result = run_command({KW_BINARY, "validate", KW_TEST_DATA_DIR "/example-run.json"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("valid kernelwatch.run/1 (6 stages, 4 cases"), std::string::npos)
      << result.output;
}

TEST(ValidateCommand, MissingFileIsAnError) {
  auto result = run_command({KW_BINARY, "validate", "/nonexistent/report.json"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("/nonexistent/report.json: cannot open"), std::string::npos) << result.output;
}

TEST(ValidateCommand, NoArgumentsIsUsageError) {
  auto result = run_command({KW_BINARY, "validate"});
  EXPECT_EQ(result.exit_code, 64) << result.output;
}

// `kw validate-config` before a push: every problem, one a line; this
// repository's own kernelwatch.json is valid.
TEST(ValidateConfigCommand, ListsEveryProblemOfAKernelwatchJson) {
  const fs::path file =
      fs::temp_directory_path() / ("kw-validate-config-" + std::to_string(getpid()) + ".json");
  std::ofstream(file) << R"({"project": "demo", "build": {"commands": ["make"]},
    "benches": [{"name": "nv", "path": "build/nv", "format": "gbnech", "arg": ["-q"]}]})";
  auto result = run_command({KW_BINARY, "validate-config", file.string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(
      result.output.find(
          file.string() +
          ": 2 problems\n"
          "  benches[0].arg: unknown field; did you mean `args`?\n"
          "  benches[0].format: unknown value \"gbnech\"; did you mean "
          "\"gbench\"? (expected kwbench, gbench, nvbench, python, perf_report, do_bench, tritonbench)\n"),
      std::string::npos)
      << result.output;
  fs::remove(file);

  auto own = run_command({KW_BINARY, "validate-config", KW_SOURCE_DIR "/kernelwatch.json"});
  EXPECT_EQ(own.exit_code, 0) << own.output;
  EXPECT_NE(own.output.find(
                ": valid: project kernelwatch, 2 bench(es): harness-selftest (kwbench), attention (kwbench)"),
            std::string::npos)
      << own.output;
}

// A valid kernelwatch.json whose bench paths nothing writes: a warning for
// each, after the valid line (exit 0: a build script may still write it).
TEST(ValidateConfigCommand, WarnsOfABenchPathNoBuildMakes) {
  const fs::path repo = fs::temp_directory_path() / ("kw-validate-paths-" + std::to_string(getpid()));
  fs::create_directories(repo / "bench");
  std::ofstream(repo / "bench" / "CMakeLists.txt") << "add_executable(gemm_bench gemm.cu)\n";
  std::ofstream(repo / "Makefile") << "tool_bench: tool.cu\n\tnvcc -o $@ $<\n";
  std::ofstream(repo / "kernelwatch.json") << R"({"project": "demo",
    "build": {"commands": ["cmake -S . -B build", "cmake --build build", "nvcc -o build/direct direct.cu"]},
    "benches": [{"name": "gemm", "path": "build/bench/gemm_bench"},
                {"name": "tool", "path": "tool_bench"},
                {"name": "direct", "path": "build/direct"},
                {"name": "typo", "path": "build/bench/gem_bench"},
                {"name": "py", "path": "missing_bench.py", "format": "python"}]})";
  auto result = run_command({KW_BINARY, "validate-config", (repo / "kernelwatch.json").string()});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find(": valid: project demo, 5 bench(es)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("  warning: benches[3].path (build/bench/gem_bench): not built yet, no build "
                               "command names gem_bench, and no CMake target or Make rule of the repository "
                               "makes it\n"),
            std::string::npos)
      << result.output;
  EXPECT_NE(
      result.output.find("  warning: benches[4].path (missing_bench.py): no such file in the repository"),
      std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("benches[0].path"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("benches[1].path"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("benches[2].path"), std::string::npos) << result.output;
  fs::remove_all(repo);
}

class ValidateBrokenTest : public ::testing::TestWithParam<kw::testing::BrokenReport> {};

TEST_P(ValidateBrokenTest, ExitsOneNamingTheField) {
  nlohmann::json report = kw::testing::load_example_report(KW_TEST_DATA_DIR);
  GetParam().mutate(report);
  fs::path file = fs::temp_directory_path() /
                  ("kw-validate-" + GetParam().name + "-" + std::to_string(getpid()) + ".json");
  std::ofstream(file) << report.dump();
  auto result = run_command({KW_BINARY, "validate", file.string()});
  fs::remove(file);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  std::string expected = GetParam().text_message().empty()
                             ? "cases[0].measurements[0].median_ns: is 1.0 but the median"
                             : GetParam().text_message();
  EXPECT_NE(result.output.find(file.string() + ": invalid: " + expected), std::string::npos) << result.output;
}

INSTANTIATE_TEST_SUITE_P(Variants, ValidateBrokenTest, ::testing::ValuesIn(kw::testing::broken_reports()),
                         [](const auto& param_info) { return param_info.param.name; });

// `kw doctor` says what a host lacks and what that costs, a line each: the
// injection library where KW_INJECT_LIBRARY points (the TEST DOUBLE of it,
// or nothing), and a python bench whose interpreter is not there.
TEST(DoctorCommand, NamesWhatIsMissingAndWhatItCosts) {
  const fs::path repo = fs::temp_directory_path() / ("kw-doctor-" + std::to_string(getpid()));
  fs::create_directories(repo);
  std::ofstream(repo / "kernelwatch.json") << R"({"project": "demo", "build": {"commands": ["true"]},
    "benches": [{"name": "venv", "path": "bench.py", "format": "python", "python": ".venv/bin/python"}]})";
  setenv("KW_INJECT_LIBRARY", "/nonexistent/libkw_inject.so", 1);
  const auto missing = run_command({KW_BINARY, "doctor", "--repo", repo.string()});
  setenv("KW_INJECT_LIBRARY", KW_INJECT_DOUBLE, 1);
  const auto found = run_command({KW_BINARY, "doctor", "--repo", repo.string()});
  unsetenv("KW_INJECT_LIBRARY");
  fs::remove_all(repo);
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("MISSING libkw_inject.so: libkw_inject.so not found (looked for "
                                "/nonexistent/libkw_inject.so"),
            std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("so none is skipped as identical to its base"), std::string::npos)
      << missing.output;
  EXPECT_NE(missing.output.find("MISSING bench venv (" + (repo / ".venv/bin/python").string() +
                                "): " + (repo / ".venv/bin/python").string() + " exited 127"),
            std::string::npos)
      << missing.output;
  EXPECT_NE(found.output.find(std::string("ok      libkw_inject.so: ") + KW_INJECT_DOUBLE), std::string::npos)
      << found.output;
}

}  // namespace
