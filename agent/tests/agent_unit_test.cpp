// Unit tests of the agent's parts: repo config, process groups, the stage
// pipeline (with the kwbench CPU test double), and the gbench/nvbench adapters.
#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "client/report_upload.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/subprocess.hpp"
#include "kw/http/gzip.hpp"
#include "pipeline/adapters.hpp"
#include "pipeline/bench_checks.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/measurement_engine.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/profile_summary.hpp"
#include "project/built_commits.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {
namespace {

using common::ChildOutcome;
using common::run_child;
using common::shell;

namespace fs = std::filesystem;
using nlohmann::json;

json valid_config() {
  return json::parse(R"({
    "project": "demo",
    "build": {"commands": ["true"], "timeout_s": 60},
    "benches": [{"name": "fake", "path": ")" KW_FAKE_BENCH R"(", "format": "kwbench"}],
    "timeouts_s": {"full_bench": 120},
    "thresholds": {"min_threshold": 0.02, "cases": {"fake.scale/n1m": 0.05}}
  })");
}

std::string config_error(const std::function<void(json&)>& mutate) {
  json config = valid_config();
  mutate(config);
  try {
    parse_repo_config(config);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "accepted";
}

TEST(RepoConfig, ParsesAValidConfig) {
  RepoConfig config = parse_repo_config(valid_config());
  EXPECT_EQ(config.project, "demo");
  EXPECT_EQ(config.build_commands, std::vector<std::string>{"true"});
  EXPECT_EQ(config.benches[0].format, BenchFormat::kwbench);
  EXPECT_EQ(config.timeout_for(common::StageName::full_bench), 120);
  EXPECT_EQ(config.timeout_for(common::StageName::load), 600);
  EXPECT_EQ(config.timeout_for(common::StageName::build), 60);
  EXPECT_EQ(config.thresholds.cases.at("fake.scale/n1m"), 0.05);
}

TEST(RepoConfig, ThisRepositorysOwnConfigIsValid) {
  RepoConfig config = load_repo_config(KW_SOURCE_DIR "/kernelwatch.json");
  EXPECT_EQ(config.project, "kernelwatch");
  auto attention = std::find_if(config.benches.begin(), config.benches.end(),
                                [](const auto& bench) { return bench.name == "attention"; });
  ASSERT_NE(attention, config.benches.end());
  EXPECT_EQ(attention->path, "build/gpu/kernels/attention/kw-bench-attention");
  ASSERT_EQ(attention->libraries.size(), 1u);
  EXPECT_EQ(attention->libraries[0].symbols, std::vector<std::string>{"kw_attention_forward"});
}

TEST(RepoConfig, ErrorsNameTheField) {
  EXPECT_EQ(config_error([](json& c) { c.erase("project"); }), "project: is required");
  EXPECT_EQ(config_error([](json& c) { c["build"]["commands"] = json::array(); }),
            "build.commands: must hold at least one command");
  EXPECT_EQ(config_error([](json& c) { c["benches"][0]["format"] = "criterion"; }),
            "benches[0].format: unknown value \"criterion\" (expected kwbench, gbench, nvbench, python)");
  EXPECT_EQ(config_error([](json& c) { c["benches"].push_back(c["benches"][0]); }),
            "benches[1].name: duplicate bench name \"fake\"");
  EXPECT_EQ(config_error([](json& c) { c["timeouts_s"]["correctnes"] = 5; }),
            "timeouts_s.correctnes: unknown field; did you mean `correctness`?");
  EXPECT_EQ(config_error([](json& c) { c["thresholds"]["min_threshold"] = 5; }),
            "thresholds.min_threshold: must be between 0 and 1 (0.02 = 2%)");
  EXPECT_EQ(config_error([](json& c) {
              c["benches"][0]["libraries"] = json::array({{{"path", 1}}});
            }),
            "benches[0].libraries[0].path: must be a string, got integer");
  EXPECT_EQ(
      config_error([](json& c) {
        c["benches"][0]["format"] = "gbench";
        c["benches"][0]["libraries"] = json::array();
      }),
      "benches[0].libraries: only kwbench benches list libraries (a python bench's load imports `modules`)");
}

TEST(RepoConfig, LaunchExpectationsAndCheckOfAnotherHarnessesBench) {
  json config = valid_config();
  config["benches"][0]["format"] = "nvbench";
  config["benches"][0]["launches"] = json::parse(R"([
    {"kernel": "*gemm_kernel<128*", "block": [256], "grid": [64, 8], "max_registers": 168, "max_shared_bytes": 99000},
    {"kernel": "*fallback*", "must_launch": false}])");
  config["benches"][0]["check"] = {{"command", {"build/gemm_test", "--quick"}}, {"timeout_s", 90}};
  RepoConfig parsed = parse_repo_config(config);
  const BenchConfig& bench = parsed.benches[0];
  ASSERT_EQ(bench.launches.size(), 2u);
  EXPECT_EQ(bench.launches[0].block, (std::array<std::int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(bench.launches[0].grid, (std::array<std::int64_t, 3>{64, 8, 1}));
  EXPECT_EQ(bench.launches[0].max_registers, 168);
  EXPECT_TRUE(bench.launches[0].must_launch);
  EXPECT_FALSE(bench.launches[1].must_launch);
  EXPECT_FALSE(bench.launches[1].block);
  EXPECT_EQ(bench.check, (std::vector<std::string>{"build/gemm_test", "--quick"}));
  EXPECT_EQ(bench.check_timeout_s, 90);

  EXPECT_EQ(
      config_error([](json& c) {
        c["benches"][0]["launches"] = json::array({{{"kernel", "k*"}}});
      }),
      "benches[0].launches: a kwbench bench declares its launches in its cases (Case::expected_launch)");
  auto nvbench_error = [](json launch) {
    return config_error([&](json& c) {
      c["benches"][0]["format"] = "nvbench";
      c["benches"][0]["launches"] = json::array({launch});
    });
  };
  EXPECT_EQ(nvbench_error({{"kernel", "k"}, {"block", {1, 2, 3, 4}}}),
            "benches[0].launches[0].block: must be an array of 1 to 3 positive integers");
  EXPECT_EQ(nvbench_error({{"kernel", "k"}, {"grid", {0}}}), "benches[0].launches[0].grid[0]: must be >= 1");
  EXPECT_EQ(nvbench_error({{"kernel", "k"}, {"max_registers", 300}}),
            "benches[0].launches[0].max_registers: must be <= 255, got 300");
  EXPECT_EQ(nvbench_error({{"block", {128}}}), "benches[0].launches[0].kernel: is required");
  EXPECT_EQ(nvbench_error({{"kernel", "k"}, {"min_registers", 3}}),
            "benches[0].launches[0].min_registers: unknown field; did you mean `max_registers`?");

  json sanitized = valid_config();
  sanitized["benches"][0]["sanitize"] = {{"tools", {"memcheck", "racecheck"}}, {"cases", "fake.scale/n1k"}};
  const BenchConfig with_sanitize = parse_repo_config(sanitized).benches[0];
  EXPECT_EQ(with_sanitize.sanitize_tools, (std::vector<std::string>{"memcheck", "racecheck"}));
  EXPECT_EQ(with_sanitize.sanitize_cases, "fake.scale/n1k");
  EXPECT_EQ(config_error([](json& c) {
              c["benches"][0]["sanitize"] = {{"tools", {"memcheck", "leakcheck"}}};
            }),
            "benches[0].sanitize.tools[1]: unknown value \"leakcheck\"; did you mean \"memcheck\"? (expected "
            "memcheck, racecheck, initcheck, synccheck)");
  EXPECT_EQ(config_error([](json& c) {
              c["benches"][0]["format"] = "gbench";
              c["benches"][0]["sanitize"] = {{"tools", {"memcheck"}}, {"cases", "x*"}};
            }),
            "benches[0].sanitize.cases: only a kwbench or python bench selects cases");
}

TEST(RepoConfig, PythonBenchesRunThroughTheirInterpreter) {
  json config = valid_config();
  config["benches"][0] = {{"name", "py"},
                          {"path", "bench/attention_bench.py"},
                          {"format", "python"},
                          {"python", ".venv/bin/python"},
                          {"modules", {"my_extension"}},
                          {"launches", {{{"kernel", "*gemm*"}, {"block", {256}}}}}};
  const BenchConfig bench = parse_repo_config(config).benches[0];
  EXPECT_EQ(bench.format, BenchFormat::python);
  EXPECT_EQ(bench.modules, std::vector<std::string>{"my_extension"});
  EXPECT_EQ(bench.launches.size(), 1u);
  EXPECT_EQ(bench_command(bench, "/checkout"),
            (std::vector<std::string>{"/checkout/.venv/bin/python", "/checkout/bench/attention_bench.py"}));
  BenchConfig on_path = bench;
  on_path.interpreter = "python3";
  EXPECT_EQ(bench_command(on_path, "/checkout"),
            (std::vector<std::string>{"python3", "/checkout/bench/attention_bench.py"}));
  EXPECT_EQ(bench_command(parse_repo_config(valid_config()).benches[0], "/checkout").size(), 1u);

  EXPECT_EQ(config_error([](json& c) { c["benches"][0]["python"] = "python3"; }),
            "benches[0].python: only a python bench has an interpreter");
  EXPECT_EQ(config_error([](json& c) { c["benches"][0]["modules"] = {"m"}; }),
            "benches[0].modules: only a python bench imports modules");
  EXPECT_EQ(config_error([](json& c) {
              c["benches"][0]["format"] = "python";
              c["benches"][0]["check"] = {{"command", {"true"}}};
            }),
            "benches[0].check: a python bench checks its cases itself (its cases' check or reference)");
  EXPECT_EQ(config_error([](json& c) { c["benches"][0]["format"] = "criterion"; }),
            "benches[0].format: unknown value \"criterion\" (expected kwbench, gbench, nvbench, python)");
}

// The shape is checked as a whole: every problem at once, a misspelt key
// with the one it meant (and not again as a missing field), wrong types.
TEST(RepoConfig, EveryProblemIsListedAtOnce) {
  json config = valid_config();
  config["benchs"] = config["benches"];
  config.erase("benches");
  config["build"]["timeout_s"] = "60";
  config["full_bench"] = {{"replicates", 2.5}, {"budget", 30}};
  try {
    parse_repo_config(config);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.problems(), (std::vector<std::string>{
                                    "benchs: unknown field; did you mean `benches`?",
                                    "build.timeout_s: must be a number, got string",
                                    "full_bench.budget: unknown field; did you mean `budget_s`?",
                                    "full_bench.replicates: must be an integer, got number",
                                }));
    EXPECT_EQ(std::string(error.what()).rfind("4 problems: benchs: unknown field", 0), 0u) << error.what();
  }
  EXPECT_EQ(repo_config_problems(json::array()),
            std::vector<std::string>{"kernelwatch.json must be an object, got array"});
  EXPECT_TRUE(repo_config_problems(valid_config()).empty());
}

// A rule the shape check cannot see (a value out of range) is not hidden by
// an unknown key or a wrong type beside it, nor by another broken rule
// whose value can be left out (a required one ends the reading).
TEST(RepoConfig, ABrokenRuleBesideAnUnknownKeyIsListedToo) {
  json config = valid_config();
  config["thresholds"] = {{"min_threshold", 5}};
  config["full_bench"] = {{"replicatse", 4}, {"budget_s", "60"}};
  config["benches"][0]["launches"] = json::array({{{"kernel", "k"}, {"max_registers", 300}}});
  try {
    parse_repo_config(config);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(error.problems(), (std::vector<std::string>{
                                    "full_bench.replicatse: unknown field; did you mean `replicates`?",
                                    "full_bench.budget_s: must be a number, got string",
                                    "benches[0].launches: a kwbench bench declares its launches in its cases "
                                    "(Case::expected_launch)",
                                    "thresholds.min_threshold: must be between 0 and 1 (0.02 = 2%)",
                                }));
  }
}

// Bad JSON is placed as an editor shows it: line and column.
TEST(RepoConfig, InvalidJsonNamesItsLineAndColumn) {
  EXPECT_EQ(line_and_column("{\n  \"a\": 1,\n  }", 15), "line 3, column 3");
  EXPECT_EQ(line_and_column("x", 1), "line 1, column 1");
  const fs::path file = kw::testing::make_temp_dir("kw-config") / "kernelwatch.json";
  std::ofstream(file) << "{\n  \"project\": \"p\",\n  \"benches\": [}\n";
  try {
    load_repo_config(file);
    FAIL() << "accepted";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()).rfind("kernelwatch.json: not valid JSON at line 3, column 15: ", 0),
              0u)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("syntax error"), std::string::npos) << error.what();
  }
  fs::remove_all(file.parent_path());
}

// A commit whose kernelwatch.json cannot be used still gets a report: its
// config stage failed, every other stage skipped, valid kernelwatch.run/1.
TEST(RepoConfig, AConfigMistakeIsAFailedConfigStage) {
  PipelineOptions options;
  options.checkout = fs::temp_directory_path();
  options.commit = std::string(40, 'a');
  options.branch = "main";
  options.agent_name = "host";
  const json report =
      config_failure_report("demo", ConfigError({"benchs: unknown field; did you mean `benches`?"}), options);
  ASSERT_EQ(report["stages"].size(), 7u);
  EXPECT_EQ(report["stages"][0]["name"], "config");
  EXPECT_EQ(report["stages"][0]["status"], "failed");
  EXPECT_EQ(report["stages"][0]["message"], "benchs: unknown field; did you mean `benches`?");
  EXPECT_EQ(report["stages"][1]["name"], "build");
  EXPECT_EQ(report["stages"][1]["status"], "skipped");
  EXPECT_EQ(report["project"], "demo");
}

TEST(RepoConfig, FullBenchSettings) {
  json config = valid_config();
  config["full_bench"] = {{"replicates", 3}, {"max_replicates", 5}, {"budget_s", 90}, {"ab", false}};
  RepoConfig parsed = parse_repo_config(config);
  EXPECT_EQ(parsed.full_bench.replicates, 3);
  EXPECT_EQ(parsed.full_bench.max_replicates, 5);
  EXPECT_EQ(parsed.full_bench.budget_s, 90);
  EXPECT_FALSE(parsed.full_bench.ab);
  EXPECT_TRUE(parsed.full_bench.context_pass);
  EXPECT_EQ(config_error([](json& c) {
              c["full_bench"] = {{"replicates", 4}, {"max_replicates", 2}};
            }),
            "full_bench.max_replicates: must be at least full_bench.replicates");
  EXPECT_EQ(config_error([](json& c) {
              c["full_bench"] = {{"replicas", 4}};
            }),
            "full_bench.replicas: unknown field; did you mean `replicates`?");
  EXPECT_EQ(config_error([](json& c) {
              c["full_bench"] = {{"ab", "yes"}};
            }),
            "full_bench.ab: must be true or false, got string");
}

// One pass's case appended as a replicate: indices shifted, medians redone.
TEST(Replicates, MergeAppendsAPassAsTheNextReplicate) {
  json accumulated = json::object();
  json pass0 = {{"name", "c"},
                {"measurements", {{{"impl", "candidate"}, {"samples_ns", {10, 12, 11}}, {"median_ns", 11}}}}};
  json pass1 = {
      {"name", "c"},
      {"measurements",
       {{{"impl", "candidate"}, {"samples_ns", {20, 22}}, {"median_ns", 21}, {"throttled_samples", {1}}}}}};
  merge_replicate(accumulated, pass0, 0, "measurements");
  merge_replicate(accumulated, pass1, 1, "measurements");
  const json& m = accumulated["measurements"][0];
  EXPECT_EQ(m["samples_ns"], json({10, 12, 11, 20, 22}));
  EXPECT_EQ(m["replicates"], json({0, 0, 0, 1, 1}));
  EXPECT_EQ(m["throttled_samples"], json({4}));
  EXPECT_EQ(m["median_ns"], 12);
}

TEST(ChildProcess, CapturesOutputAndExitCode) {
  std::atomic<bool> stop{false};
  ChildOutcome outcome = run_child(shell("echo hello; echo oops >&2; exit 3", "/tmp", 10), stop);
  EXPECT_EQ(outcome.exit_code, 3);
  EXPECT_FALSE(outcome.timed_out);
  EXPECT_EQ(outcome.output_tail, "hello\noops\n");
  EXPECT_EQ(outcome.describe(), "exited 3");
}

TEST(ChildProcess, TimeoutKillsTheWholeProcessGroup) {
  fs::path pidfile = fs::temp_directory_path() / ("kw-pg-" + std::to_string(getpid()));
  std::atomic<bool> stop{false};
  // A background grandchild that would outlive its parent if only the parent were killed.
  ChildOutcome outcome =
      run_child(shell("sleep 60 & echo $! > " + pidfile.string() + "; wait", "/tmp", 0.5), stop);
  EXPECT_TRUE(outcome.timed_out);
  EXPECT_LT(outcome.seconds, 10);
  EXPECT_NE(outcome.describe().find("timed out after"), std::string::npos);
  std::ifstream in(pidfile);
  pid_t grandchild = 0;
  in >> grandchild;
  ASSERT_GT(grandchild, 0);
  // Its process group was killed; the grandchild is gone (or a zombie) once
  // the kernel has delivered the signal.
  std::string state;
  bool ended = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid_field, command;
    stat >> pid_field >> command >> state;
    ended = !stat || state == "Z";
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended) << "the grandchild survived the timeout by 5 s (state " << state << ")";
  fs::remove(pidfile);
}

TEST(ChildProcess, StopFlagEndsTheStage) {
  std::atomic<bool> stop{false};
  std::thread raise([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  ChildOutcome outcome = run_child(shell("sleep 60", "/tmp", 60), stop);
  raise.join();
  EXPECT_TRUE(outcome.stopped);
  EXPECT_FALSE(outcome.timed_out);
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kw-pipeline-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    checkout_ = pattern;
  }
  void TearDown() override { fs::remove_all(checkout_); }

  // A pull request: the checkout against `base`, measured in one job.
  PipelineOptions ab_options(const fs::path& base) {
    PipelineOptions options;
    options.checkout = checkout_;
    options.base_checkout = base;
    options.base_commit = std::string(40, 'b');
    options.commit = std::string(40, 'c');
    options.branch = "pr";
    options.agent_name = "test";
    options.gpu_available = true;
    options.log = [this](const std::string& line) { log_ += line + "\n"; };
    return options;
  }
  // Its full_bench alone.
  json run_ab(const json& config, const fs::path& base) {
    PipelineOptions options = ab_options(base);
    options.only_stages = {common::StageName::full_bench};
    return run_pipeline(parse_repo_config(config), options);
  }
  json run(const json& behaviour, bool gpu = true, const json& config = valid_config(),
           std::vector<common::StageName> stages = {}) {
    std::ofstream(checkout_ / "kwbench-fake.json") << behaviour.dump();
    PipelineOptions options;
    options.only_stages = std::move(stages);
    options.checkout = checkout_;
    options.commit = std::string(40, 'c');
    options.branch = "main";
    options.agent_name = "test";
    options.gpu_available = gpu;
    options.log = [this](const std::string& line) { log_ += line + "\n"; };
    options.on_stage = [this](const json& event) { events_.push_back(event); };
    return run_pipeline(parse_repo_config(config), options);
  }

  static std::vector<std::string> statuses(const json& report) {
    std::vector<std::string> out;
    for (const json& stage : report["stages"]) out.push_back(stage["status"]);
    return out;
  }

  fs::path checkout_;
  std::string log_;
  std::vector<json> events_;  // what on_stage was given, in order
};

TEST_F(PipelineTest, AllStagesPassAndTheReportIsValid) {
  json report = run(json::object());
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "passed", "passed", "passed", "passed"}));
  EXPECT_NO_THROW(common::parse_run_report(report));
  ASSERT_EQ(report["cases"].size(), 2u);
  EXPECT_TRUE(report["cases"][0].contains("launches"));
  EXPECT_TRUE(report["cases"][0].contains("correctness"));
  EXPECT_EQ(report["cases"][0]["measurements"].size(), 2u);
  EXPECT_EQ(report["device"]["name"], "kwbench CPU test double");
  // Progress: each stage's start and end.
  EXPECT_NE(log_.find("stage build started"), std::string::npos);
  EXPECT_NE(log_.find("stage full_bench passed in"), std::string::npos);
  // Each stage's cost: wall time, and the GPU time of its bench processes,
  // which the stage's own work around them can only add to.
  EXPECT_EQ(report["stages"][0]["gpu_seconds"], 0.0);
  for (std::size_t i = 1; i < 6; ++i) {
    const json& stage = report["stages"][i];
    EXPECT_GT(stage["gpu_seconds"].get<double>(), 0) << stage.dump();
    EXPECT_LE(stage["gpu_seconds"].get<double>(), stage["duration_ms"].get<double>() / 1000 + 0.001)
        << stage.dump();
  }
}

// full_bench as replicates of the kwbench test double: every sample tagged
// with its replicate, and with a base checkout the base measured in the same
// run, its passes alternating with the head's.
TEST_F(PipelineTest, FullBenchMeasuresReplicatesAndTheBaseInTheSameJob) {
  json config = valid_config();
  config["full_bench"] = {{"replicates", 3}, {"max_replicates", 3}, {"confirm_replicates", 2}};
  json report = run(json::object(), true, config);
  const json& candidate = report["cases"][0]["measurements"][0];
  EXPECT_EQ(candidate["impl"], "candidate");
  EXPECT_EQ(candidate["replicates"].front(), 0);
  EXPECT_EQ(candidate["replicates"].back(), 2);
  EXPECT_FALSE(report["cases"][0].contains("base_measurements"));
  EXPECT_NE(log_.find("replicate 3 of every case"), std::string::npos) << log_;
  // The baselines: one context replicate, after the candidate's.
  ASSERT_EQ(report["cases"][0]["measurements"].size(), 2u);
  EXPECT_EQ(report["cases"][0]["measurements"][1]["impl"], "baseline:memcpy");
  EXPECT_EQ(report["cases"][0]["measurements"][1]["replicates"].back(), 0);

  // The same checkout as its own base (a no-op pull request), the head 30% slower.
  std::ofstream(checkout_ / "kwbench-fake.json") << json{{"slowdown", 1.3}}.dump();
  char pattern[] = "/tmp/kw-base-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  fs::path base = pattern;
  std::ofstream(base / "kwbench-fake.json") << "{}";
  json ab = run_ab(config, base);
  fs::remove_all(base);
  EXPECT_NO_THROW(common::parse_run_report(ab));
  EXPECT_EQ(statuses(ab),
            (std::vector<std::string>{"passed", "skipped", "skipped", "skipped", "skipped", "passed"}));
  const json& c = ab["cases"][0];
  ASSERT_TRUE(c.contains("base_measurements")) << c.dump();
  const json& base_candidate = c["base_measurements"][0];
  EXPECT_EQ(base_candidate["impl"], "candidate");
  EXPECT_LT(base_candidate["median_ns"].get<double>() * 1.2, c["measurements"][0]["median_ns"].get<double>());
  // 30% slower is screened and confirmed: 3 + 2 replicates a side.
  EXPECT_EQ(c["first_pass_replicates"], 3);
  EXPECT_EQ(c["measurements"][0]["replicates"].back(), 4);
  EXPECT_EQ(base_candidate["replicates"].back(), 4);
  // Judged against its base, not its history: no context pass.
  EXPECT_EQ(c["measurements"].size(), 1u);
}

// The first pass screens a case by the threshold the server will judge it
// with: where kernelwatch.json sets none, the project's setting on the
// server, which a claimed job carries. A head 5% slower is screened at the
// default 1% and left alone at a project's 20%.
TEST_F(PipelineTest, TheFirstPassScreensByTheProjectsThresholdOnTheServer) {
  json config = valid_config();
  config.erase("thresholds");
  config["full_bench"] = {{"replicates", 3}, {"max_replicates", 3}, {"confirm_replicates", 2}};
  std::ofstream(checkout_ / "kwbench-fake.json") << json{{"slowdown", 1.05}}.dump();
  char pattern[] = "/tmp/kw-base-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path base = pattern;
  std::ofstream(base / "kwbench-fake.json") << "{}";
  for (const std::optional<double> project : {std::optional<double>(), std::optional<double>(0.2)}) {
    PipelineOptions options = ab_options(base);
    options.only_stages = {common::StageName::full_bench};
    if (project) options.project_thresholds = common::Thresholds{project, {}};
    const json report = run_pipeline(parse_repo_config(config), options);
    const json& c = report["cases"][0];
    EXPECT_EQ(c.contains("first_pass_replicates"), !project.has_value()) << c.dump().substr(0, 300);
    EXPECT_EQ(c["measurements"][0]["replicates"].back(), project ? 2 : 4);
  }
  fs::remove_all(base);
}

// An A/B case the decision would leave inconclusive gets two more
// replicates a side at a time, up to resolve_replicates; without them it is
// named inconclusive in the stage's details. At three replicates a side the
// interval (the default noise prior's 1.5% between replicates, 8 df, with
// the test double's 0.2%) is about +-2.9%, past three 0.8% thresholds; a few
// more replicates a side bring it inside.
TEST_F(PipelineTest, AnInconclusiveCaseIsMeasuredAgainUpToResolveReplicates) {
  for (int resolve : {0, 15}) {
    json config = valid_config();
    config["thresholds"] = {{"min_threshold", 0.008}};
    config["full_bench"] = {
        {"replicates", 3}, {"max_replicates", 3}, {"confirm_replicates", 0}, {"resolve_replicates", resolve}};
    std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
    char pattern[] = "/tmp/kw-base-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    const fs::path base = pattern;
    std::ofstream(base / "kwbench-fake.json") << "{}";
    log_.clear();
    const json ab = run_ab(config, base);
    fs::remove_all(base);
    const json& details = ab["stages"][5]["details"];
    std::int64_t most = 0;
    for (const json& c : ab["cases"])
      most = std::max(most, c["measurements"][0]["replicates"].back().get<std::int64_t>() + 1);
    if (resolve == 0) {
      EXPECT_EQ(most, 3) << log_;
      EXPECT_FALSE(details["inconclusive_cases"].empty()) << details.dump();
    } else {
      EXPECT_NE(log_.find("round 1: 2 more replicates a side of"), std::string::npos) << log_;
      EXPECT_GT(most, 3) << log_;
      EXPECT_LE(most, 15) << log_;
    }
  }
}

// Fingerprints (the kwbench test double writes what libkw_inject.so would):
// a pull request times only the cases whose code changed, plus the audit of
// those that did not.
class FingerprintTest : public PipelineTest {
 protected:
  void SetUp() override {
    PipelineTest::SetUp();
    setenv("KW_INJECT_LIBRARY", KW_FAKE_BENCH, 1);  // stands in: the test double writes the records
    char pattern[] = "/tmp/kw-base-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    base_ = pattern;
  }
  void TearDown() override {
    unsetenv("KW_INJECT_LIBRARY");
    fs::remove_all(base_);
    PipelineTest::TearDown();
  }
  json pull_request(const json& head, const json& base, double audit_share) {
    std::ofstream(checkout_ / "kwbench-fake.json") << head.dump();
    std::ofstream(base_ / "kwbench-fake.json") << base.dump();
    json config = valid_config();
    config["full_bench"] = {{"replicates", 2},
                            {"max_replicates", 2},
                            {"confirm_replicates", 0},
                            {"resolve_replicates", 0},
                            {"audit_share", audit_share}};
    return run_ab(config, base_);
  }
  static const json* case_named(const json& report, const std::string& name) {
    for (const json& c : report["cases"])
      if (c["name"] == name) return &c;
    return nullptr;
  }
  fs::path base_;
};

TEST_F(FingerprintTest, APullRequestTimesOnlyTheCasesWhoseKernelChanged) {
  const json ab = pull_request({{"kernel_code", {{"fake.scale/n16m", "v2"}}}}, json::object(), 0);
  ASSERT_NO_THROW(common::parse_run_report(ab)) << ab.dump();
  const json* same = case_named(ab, "fake.scale/n1m");
  const json* changed = case_named(ab, "fake.scale/n16m");
  ASSERT_TRUE(same != nullptr && changed != nullptr) << ab.dump();
  EXPECT_EQ(same->value("identical_to_base", false), true) << same->dump();
  EXPECT_TRUE(same->value("measurements", json::array()).empty()) << same->dump();
  EXPECT_EQ((*same)["fingerprint"]["digest"].get<std::string>().size(), 64U);
  EXPECT_TRUE(changed->contains("base_measurements")) << changed->dump();
  EXPECT_NE((*changed)["fingerprint"]["digest"], (*same)["fingerprint"]["digest"]);
  const json& details = ab["stages"][5]["details"]["fake"]["fingerprints"];
  EXPECT_EQ(details["changed"]["fake.scale/n16m"], "the code of kernel fake_kernel_n16m(float*)") << details;
  EXPECT_EQ(details["not_timed"], 1);
  EXPECT_NE(ab["stages"][5]["message"].get<std::string>().find("1 identical to the base, not timed"),
            std::string::npos);
}

// quick_bench too times the changed cases alone, in a process of its own
// after the preflight's launch_geometry and correctness of every case.
TEST_F(FingerprintTest, QuickBenchTimesOnlyTheCasesWhoseKernelChanged) {
  std::ofstream(checkout_ / "kwbench-fake.json") << json{{"kernel_code", {{"fake.scale/n16m", "v2"}}}}.dump();
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}, {"replicates", 2}, {"max_replicates", 2}};
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  ASSERT_NO_THROW(common::parse_run_report(report)) << report.dump();
  EXPECT_EQ(report["stages"][3]["details"]["fake"]["cases_run"], 2) << report["stages"][3].dump();
  const json& quick = report["stages"][4];
  EXPECT_EQ(quick["status"], "passed") << quick.dump();
  EXPECT_EQ(quick["details"]["fake"]["cases_run"], 1) << quick.dump();
  EXPECT_EQ(quick["details"]["fake"]["identical_to_base"], 1) << quick.dump();
  EXPECT_NE(quick["message"].get<std::string>().find("1 case(s) run code identical to the base's: not timed"),
            std::string::npos)
      << quick.dump();
}

TEST_F(FingerprintTest, AnIdenticalPullRequestTimesItsAuditOrNothing) {
  const json audited = pull_request(json::object(), json::object(), 0.05);
  ASSERT_NO_THROW(common::parse_run_report(audited));
  int identical = 0, audits = 0;
  for (const json& c : audited["cases"]) {
    identical += c.value("identical_to_base", false);
    if (c.value("audit", false)) {
      ++audits;
      EXPECT_TRUE(c.contains("base_measurements")) << c.dump();
    }
  }
  EXPECT_EQ(identical, 1) << audited.dump();  // at least one audited, whatever the share
  EXPECT_EQ(audits, 1) << audited.dump();

  log_.clear();
  const json untimed = pull_request(json::object(), json::object(), 0);
  ASSERT_NO_THROW(common::parse_run_report(untimed));
  EXPECT_EQ(untimed["stages"][5]["status"], "passed") << untimed["stages"][5].dump();
  for (const json& c : untimed["cases"]) EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
  EXPECT_EQ(log_.find("replicate 1 of every case"), std::string::npos) << log_;
}

// The audit is drawn once a job, over every bench's identical cases: two
// benches of two identical cases each, at 5%, time one case in all.
TEST_F(FingerprintTest, TheAuditIsDrawnOnceAJobNotOnceABench) {
  std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  json config = valid_config();
  json second = config["benches"][0];
  second["name"] = "second";
  second["args"] = {"--case-prefix", "second."};
  config["benches"].push_back(second);
  config["full_bench"] = {{"replicates", 2},
                          {"max_replicates", 2},
                          {"confirm_replicates", 0},
                          {"resolve_replicates", 0},
                          {"audit_share", 0.05}};
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  ASSERT_NO_THROW(common::parse_run_report(report)) << report.dump();
  ASSERT_EQ(report["cases"].size(), 4U) << report.dump();
  int audits = 0, identical = 0;
  for (const json& c : report["cases"]) {
    audits += static_cast<int>(c.value("audit", false));
    identical += static_cast<int>(c.value("identical_to_base", false));
  }
  EXPECT_EQ(audits, 1) << report.dump();
  EXPECT_EQ(identical, 3) << report.dump();
  for (const char* bench : {"fake", "second"})
    EXPECT_EQ(report["stages"][4]["details"][bench]["identical_to_base"], 2) << report["stages"][4].dump();
}

TEST_F(FingerprintTest, AHostCodeChangeTimesEveryCaseItRuns) {
  for (const fs::path& side : {checkout_, base_}) fs::create_directories(side / "build");
  fs::copy_file("/bin/true", checkout_ / "build/libhost.so");
  fs::copy_file("/bin/true", base_ / "build/libhost.so");
  const json host = {{"host_files", {"build/libhost.so"}}};
  const json same = pull_request(host, host, 0);
  for (const json& c : same["cases"]) {
    EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
    EXPECT_TRUE(c["fingerprint"]["parts"]["host"].contains("build/libhost.so")) << c.dump();
  }
  fs::copy_file("/bin/ls", checkout_ / "build/libhost.so", fs::copy_options::overwrite_existing);
  const json changed = pull_request(host, host, 0);
  for (const json& c : changed["cases"]) EXPECT_TRUE(c.contains("base_measurements")) << c.dump();
  EXPECT_EQ(changed["stages"][5]["details"]["fake"]["fingerprints"]["changed"]["fake.scale/n1m"],
            "the host code of build/libhost.so");
}

// The head's fingerprints come from its preflight; the base's from a launch
// pass of its own.
TEST_F(FingerprintTest, TheHeadsFingerprintsComeFromItsPreflight) {
  std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  const fs::path calls = checkout_ / "calls.txt";
  setenv("KW_FAKE_CALLS", calls.c_str(), 1);
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}};
  const json report = run_pipeline(parse_repo_config(config), ab_options(base_));
  unsetenv("KW_FAKE_CALLS");
  ASSERT_NO_THROW(common::parse_run_report(report));
  for (const json& c : report["cases"]) {
    EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
    EXPECT_TRUE(c.contains("correctness")) << "the preflight's parts stay";
  }
  std::ifstream in(calls);
  std::vector<std::string> stages;
  for (std::string line; std::getline(in, line);) stages.push_back(line);
  // The head's preflight (launch_geometry and correctness), its listing, the
  // base's launch pass: nothing timed, not even by quick_bench.
  EXPECT_EQ(stages, (std::vector<std::string>{"preflight", "", "launch_geometry"}));
}

// A base's fingerprints are a commit's: the next pull request on the same
// base takes them from the agent's cache, with no launch pass of the base.
TEST_F(FingerprintTest, TheBasesFingerprintsAreKeptForTheNextPullRequestOnIt) {
  std::ofstream(checkout_ / "kwbench-fake.json") << "{}";
  std::ofstream(base_ / "kwbench-fake.json") << "{}";
  const fs::path calls = checkout_ / "calls.txt", cache = checkout_ / "fingerprint-cache";
  json config = valid_config();
  config["full_bench"] = {{"audit_share", 0}};
  setenv("KW_FAKE_CALLS", calls.c_str(), 1);
  for (int job = 0; job < 2; ++job) {
    PipelineOptions options = ab_options(base_);
    options.only_stages = {common::StageName::full_bench};
    options.fingerprint_cache_dir = cache;
    const json report = run_pipeline(parse_repo_config(config), options);
    for (const json& c : report["cases"]) EXPECT_EQ(c.value("identical_to_base", false), true) << c.dump();
  }
  unsetenv("KW_FAKE_CALLS");
  std::ifstream in(calls);
  int launch_passes = 0;
  for (std::string line; std::getline(in, line);) launch_passes += line == "launch_geometry";
  EXPECT_EQ(launch_passes, 3) << "the head's twice, the base's once";
  EXPECT_NE(log_.find("fingerprints of base bbbbbbbbbbbb kept from an earlier job"), std::string::npos)
      << log_;
}

// A bench the build did not write (or wrote elsewhere) fails load with that
// cause in the headline, for every format.
TEST_F(PipelineTest, AMissingOrNonExecutableBenchIsNamedAsSuch) {
  for (const char* format : {"kwbench", "gbench", "nvbench"}) {
    json config = valid_config();
    config["benches"] = json::array({{{"name", "micro"}, {"path", "build/my_bench"}, {"format", format}}});
    json report = run(json::object(), true, config);
    EXPECT_EQ(report["stages"][1]["status"], "failed") << format;
    EXPECT_EQ(report["stages"][1]["message"],
              "micro: `build/my_bench`: no such file after the build (did the build write it elsewhere?)")
        << format;
    EXPECT_EQ(report["stages"][5]["status"], "skipped") << format;
  }
  fs::create_directories(checkout_ / "build");
  std::ofstream(checkout_ / "build/my_bench") << "not a program";
  json config = valid_config();
  config["benches"] = json::array({{{"name", "micro"}, {"path", "build/my_bench"}, {"format", "gbench"}}});
  EXPECT_EQ(run(json::object(), true, config)["stages"][1]["message"],
            "micro: `build/my_bench`: not executable (is it the built bench?)");
}

TEST_F(PipelineTest, StopsAtTheFirstFailedPreflightStage) {
  json report = run({{"fail_stage", "launch_geometry"}});
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "failed", "skipped", "skipped", "skipped"}));
  EXPECT_EQ(report["stages"][2]["message"],
            "fake: fake.scale/n1m: block: expected (384,1,1), observed (128,1,1)");
  EXPECT_EQ(report["stages"][3]["message"], "not run: the launch_geometry stage failed");
}

// What `kw agent` streams to the server: each stage as it starts and as it
// ends, exactly as the report will hold it, the failed one before any later
// stage is decided. The preflight's per-case stages start inside the load
// stage's bench process, as the bench says; they end after load.
TEST_F(PipelineTest, EachStageIsGivenOutAsItStartsAndEnds) {
  json report = run({{"fail_stage", "launch_geometry"}});
  std::vector<std::string> seen;
  for (const json& event : events_) {
    seen.push_back(event.contains("started")
                       ? "started " + event["started"].get<std::string>()
                       : event["name"].get<std::string>() + " " + event["status"].get<std::string>());
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"started build", "build passed", "started load",
                                      "started launch_geometry", "load passed", "launch_geometry failed",
                                      "correctness skipped", "quick_bench skipped", "full_bench skipped"}));
  EXPECT_EQ(events_[5], report["stages"][2]);
  EXPECT_EQ(events_[4], report["stages"][1]);
}

TEST_F(PipelineTest, NoGpuSkipsTheGpuStages) {
  json report = run(json::object(), false);
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "skipped", "skipped", "skipped", "skipped", "skipped"}));
  for (std::size_t i = 1; i < 6; ++i) EXPECT_EQ(report["stages"][i]["message"], "no CUDA device");
  EXPECT_FALSE(report.contains("device"));
}

// A bench whose output names no device ran on the host's GPU: the report
// takes the CUDA driver's device 0. Where there is no driver (CI), there is
// no device to give, and the report cannot be made.
TEST_F(PipelineTest, ABenchThatNamesNoDeviceGetsTheHostsGpu) {
  const json host = kw::agent::host_gpu_device();
  if (host.is_null()) {
    try {
      run({{"no_device", true}}, true);
      ADD_FAILURE() << "a report with measurements and no device";
    } catch (const std::exception& error) {
      EXPECT_NE(std::string(error.what()).find("device"), std::string::npos) << error.what();
    }
    EXPECT_NE(log_.find("none from the CUDA driver"), std::string::npos) << log_;
    return;
  }
  json report = run({{"no_device", true}}, true);
  EXPECT_EQ(report["device"], host);
}

// A host without a GPU still runs a Google Benchmark bench (a CPU
// benchmark) and skips only what needs a GPU; the report's device is the
// host's CPU. The bench is the real Google Benchmark library's output.
TEST_F(PipelineTest, NoGpuStillRunsCpuBenchmarksOnTheHostCpu) {
  if (std::string(KW_GBENCH_SAMPLE).empty()) GTEST_SKIP() << "Google Benchmark not installed";
  json config = valid_config();
  config["benches"].push_back({{"name", "gb"},
                               {"path", KW_GBENCH_SAMPLE},
                               {"format", "gbench"},
                               {"args", {"--benchmark_repetitions=5", "--benchmark_min_time=0.01"}}});
  json report = run(json::object(), false, config);
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "skipped", "skipped", "skipped", "passed"}));
  // Its load (symbols bound at start) needs no GPU either.
  EXPECT_EQ(
      report["stages"][1]["message"],
      "fake: skipped, no CUDA device; gb: its symbols resolve; kernel images not checked: no CUDA device");
  EXPECT_EQ(report["stages"][2]["message"], "no CUDA device");
  EXPECT_NE(report["stages"][5]["message"].get<std::string>().find("fake: skipped, no CUDA device"),
            std::string::npos)
      << report["stages"][5]["message"];
  ASSERT_EQ(report["cases"].size(), 2u) << report["cases"].dump();
  // In the bench's own order, each as replicates: a process per replicate,
  // the bench's 5 repetitions each.
  EXPECT_EQ(report["cases"][0]["name"], "gb/BM_sum/1024");
  EXPECT_EQ(report["cases"][1]["name"], "gb/BM_manual/manual_time");
  for (const json& c : report["cases"]) {
    const json& m = c["measurements"][0];
    const std::set<int> replicates = m["replicates"].get<std::set<int>>();
    EXPECT_GE(replicates.size(), 4u) << c["name"];
    EXPECT_EQ(m["samples_ns"].size(), 5 * replicates.size()) << c["name"];
  }
  // 4 replicates a case at least, more (up to 8) where they still spread.
  EXPECT_TRUE(std::regex_search(report["stages"][5]["message"].get<std::string>(),
                                std::regex("gb: 2 cases, [4-8]-[4-8] replicates in [0-9.]+ s; not observed: "
                                           "per-sample clocks and throttling")))
      << report["stages"][5]["message"];
  ASSERT_TRUE(report.contains("device"));
  EXPECT_EQ(report["device"]["kind"], "cpu");
  EXPECT_FALSE(report["device"]["name"].get<std::string>().empty());
  EXPECT_GT(report["device"]["memory_bytes"].get<std::int64_t>(), 1);
}

// A python bench (kernels/python/kwbench.py) with the helper's CPU stand-in
// backend, a TEST DOUBLE for CUDA and torch: the agent runs it with kwbench's
// command line through the interpreter, stage by stage, and its replicates.
json python_config(const std::string& cases) {
  return {{"project", "demo"},
          {"build", {{"commands", {"true"}}}},
          {"benches",
           {{{"name", "py"},
             {"path", std::string(KW_SOURCE_DIR) + "/kernels/python/tests/standin_bench.py"},
             {"format", "python"},
             {"python", "python3"},
             {"cases", cases},
             {"args", {"--backend", "cpu-stand-in"}}}}},
          {"full_bench", {{"replicates", 2}, {"max_replicates", 2}, {"replicate_seconds", 0.05}}}};
}

TEST_F(PipelineTest, PythonBenchRunsLoadCorrectnessQuickBenchAndReplicates) {
  using common::StageName;
  json report = run(json::object(), true, python_config("saxpy/ok,saxpy/edge"),
                    {StageName::load, StageName::correctness, StageName::quick_bench, StageName::full_bench});
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "skipped", "passed", "passed", "passed"}))
      << report["stages"].dump(1);
  EXPECT_NO_THROW(common::parse_run_report(report));
  const std::string load = report["stages"][1]["message"];
  EXPECT_NE(load.find("py: imported json"), std::string::npos) << load;
  EXPECT_EQ(report["stages"][1]["details"]["py"]["bind_now"], true) << "load runs under LD_BIND_NOW";
  EXPECT_EQ(report["device"]["kind"], "cpu");
  EXPECT_EQ(report["device"]["name"].get<std::string>().rfind("CPU stand-in: ", 0), 0u) << report["device"];
  ASSERT_EQ(report["cases"].size(), 2u) << report["cases"].dump();
  for (const json& c : report["cases"]) {
    EXPECT_TRUE(c["correctness"]["passed"].get<bool>()) << c.dump();
    if (c["name"] == "saxpy/edge") {
      EXPECT_TRUE(c.value("measurements", json::array()).empty()) << "a correctness-only case is not timed";
      continue;
    }
    ASSERT_EQ(c["measurements"].size(), 2u)
        << c.dump();  // the candidate and the copy baseline, not "missing"
    const json& candidate = c["measurements"][0];
    EXPECT_EQ(candidate["impl"], "candidate");
    EXPECT_EQ(candidate["replicates"].size(), candidate["samples_ns"].size());
    EXPECT_EQ(candidate["replicates"].back(), 1) << "two replicates";
  }
  const std::string quick = report["stages"][4]["details"]["py"]["cases"][0]["message"];
  EXPECT_NE(quick.find("x of baseline:copy, inside 0.2x..5x"), std::string::npos) << quick;
}

// Two shards of one job: each case's preflight in exactly one shard, the
// correctness-only one too, and each shard's full_bench times the timed
// cases its preflight checked (so its launch pass fingerprinted them).
TEST_F(PipelineTest, ShardsSplitThePreflightAndFullBenchSoEveryCaseIsCheckedOnce) {
  using common::StageName;
  std::map<std::string, int> checked;
  std::set<std::string> timed;
  for (std::int64_t index : {0, 1}) {
    PipelineOptions options;
    options.only_stages = {StageName::load, StageName::correctness, StageName::full_bench};
    options.checkout = checkout_;
    options.commit = std::string(40, 'c');
    options.branch = "main";
    options.agent_name = "test";
    options.gpu_available = true;
    options.shard = common::ShardSpec{index, 2};
    options.log = [this](const std::string& line) { log_ += line + "\n"; };
    const json report =
        run_pipeline(parse_repo_config(python_config("saxpy/ok,saxpy/slow,saxpy/edge")), options);
    EXPECT_EQ(report["shard"], json({{"index", index + 1}, {"count", 2}}));
    EXPECT_EQ(report["stages"][3]["status"], "passed") << report["stages"][3].dump();
    std::set<std::string> checked_here;
    for (const json& c : report["cases"]) {
      if (c.contains("correctness")) {
        ++checked[c["name"]];
        checked_here.insert(c["name"]);
      }
      if (c.value("measurements", json::array()).empty()) continue;
      EXPECT_TRUE(checked_here.contains(c["name"])) << c["name"] << " timed by a shard that did not check it";
      EXPECT_TRUE(timed.insert(c["name"]).second) << c["name"] << " timed twice";
    }
  }
  EXPECT_EQ(checked, (std::map<std::string, int>{{"saxpy/edge", 1}, {"saxpy/ok", 1}, {"saxpy/slow", 1}}));
  EXPECT_EQ(timed, (std::set<std::string>{"saxpy/ok", "saxpy/slow"}));
  EXPECT_NE(log_.find("py: shard 1/2, 2 of its 3 cases"), std::string::npos) << log_;
}

// The processes that wait for a go file (prepared_passes.hpp), by pid.
// The parent of process `pid` (0 once there is none to read).
pid_t parent_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
  const auto end = stat.rfind(')');
  if (end == std::string::npos) return 0;
  std::istringstream rest(stat.substr(end + 1));
  std::string state;
  pid_t parent = 0;
  rest >> state >> parent;
  return parent;
}

// This test's prepared processes still waiting (another test's, run beside
// it by ctest -j, are not its business).
std::vector<std::string> waiting_for_a_go() {
  std::vector<std::string> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(std::string("--go-file\0", 10)) == std::string::npos) continue;
    for (pid_t up = parent_of(entry.path().filename().string()); up > 1; up = parent_of(std::to_string(up))) {
      if (up == getpid()) {
        pids.push_back(entry.path().filename().string());
        break;
      }
    }
  }
  return pids;
}

// A python pull request's replicates in processes started before their
// pass: both sides are prepared before the first pass, two a side, so ABBA
// over four replicates a side is eight passes and none of them cold. Every
// replicate is still a process of its own, and none is left waiting once
// the stage ends.
TEST_F(PipelineTest, PythonReplicatesRunInPreparedProcesses) {
  json config = python_config("saxpy/ok");
  config["full_bench"] = {{"replicates", 4},
                          {"max_replicates", 4},
                          {"confirm_replicates", 0},
                          {"resolve_replicates", 0},
                          {"replicate_seconds", 0.05}};
  char pattern[] = "/tmp/kw-base-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path base = pattern;
  const json ab = run_ab(config, base);
  fs::remove_all(base);
  const json& stage = ab["stages"][5];
  ASSERT_EQ(stage["status"], "passed") << stage.dump();
  EXPECT_EQ(stage["details"]["py"]["prepared_passes"], 8) << stage["details"].dump();
  const json& c = ab["cases"][0];
  for (const char* side : {"measurements", "base_measurements"}) {
    const json& candidate = c[side][0];
    std::set<std::int64_t> replicates(candidate["replicates"].begin(), candidate["replicates"].end());
    EXPECT_EQ(replicates, (std::set<std::int64_t>{0, 1, 2, 3})) << side;
  }
  EXPECT_TRUE(waiting_for_a_go().empty()) << "a prepared process outlived its stage";
}

TEST_F(PipelineTest, PythonBenchFailsCorrectnessPerCaseAndGoesOnAfterABrokenContext) {
  json report = run(json::object(), true, python_config("saxpy/unwritten,saxpy/nan,saxpy/crash,saxpy/ok"),
                    {common::StageName::correctness});
  const json& stage = report["stages"][3];
  EXPECT_EQ(stage["status"], "failed");
  const std::string message = stage["message"];
  EXPECT_NE(message.find("py: 3 of 4 cases failed: saxpy/unwritten: 1000 output values are NaN/Inf"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("saxpy/nan: 1 output values are NaN/Inf"), std::string::npos) << message;
  EXPECT_NE(message.find("saxpy/crash: RuntimeError: illegal memory access (stand-in)"), std::string::npos)
      << message;
  // The case after the broken context ran in a fresh process image, and passed.
  bool ok_passed = false;
  for (const json& c : stage["details"]["py"]["cases"])
    ok_passed |= c["name"] == "saxpy/ok" && c["status"] == "passed";
  EXPECT_TRUE(ok_passed) << stage["details"].dump();
}

TEST_F(PipelineTest, PythonBenchQuickBenchHoldsTheSanityRange) {
  json report = run(json::object(), true, python_config("saxpy/slow"), {common::StageName::quick_bench});
  const std::string message = report["stages"][4]["message"];
  EXPECT_EQ(report["stages"][4]["status"], "failed") << message;
  EXPECT_NE(message.find("saxpy/slow: candidate runs at 0.0"), std::string::npos) << message;
  EXPECT_NE(message.find("x of baseline:copy"), std::string::npos) << message;
}

TEST_F(PipelineTest, BuildFailureKeepsTheCompilerErrorAndSkipsTheRest) {
  json config = valid_config();
  config["build"]["commands"] = {
      "echo 'attention.cu(12): error: identifier \"tile_k\" is undefined' >&2; exit 2"};
  json report = run(json::object(), true, config);
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"failed", "skipped", "skipped", "skipped", "skipped", "skipped"}));
  EXPECT_NE(report["stages"][0]["message"].get<std::string>().find("exited 2"), std::string::npos);
  EXPECT_NE(report["stages"][0]["log_tail"].get<std::string>().find("identifier \"tile_k\" is undefined"),
            std::string::npos);
}

// A stage's timeout holds inside the preflight's one process (kwbench keeps
// it), and for an older kwbench that runs a process per stage (the agent).
TEST_F(PipelineTest, StageTimeoutFailsTheStage) {
  json config = valid_config();
  config["timeouts_s"]["correctness"] = 1;
  fs::path marker = checkout_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  for (bool older : {false, true}) {
    json report =
        run({{"sleep_stage", "correctness"}, {"sleep_seconds", 30}, {"no_preflight", older}}, true, config);
    EXPECT_EQ(report["stages"][3]["status"], "failed");
    const std::string expected = older ? "timed out after 1 s" : "the correctness stage's 1 s ran out";
    EXPECT_NE(report["stages"][3]["message"].get<std::string>().find(expected), std::string::npos)
        << report["stages"][3]["message"];
    EXPECT_EQ(report["stages"][4]["status"], "skipped");
  }
  unsetenv("KW_FAKE_SLEEP_FILE");
}

// load, launch_geometry, correctness and quick_bench are one bench process;
// each stage keeps its own result and cost. A kwbench that predates
// --stage preflight gets a process per stage.
TEST_F(PipelineTest, PreflightIsOneBenchProcessWithTheStagesKeptApart) {
  fs::path calls = checkout_ / "calls";
  setenv("KW_FAKE_CALLS", calls.c_str(), 1);
  for (bool older : {false, true}) {
    fs::remove(calls);
    json report = run({{"no_preflight", older}});
    EXPECT_EQ(statuses(report),
              (std::vector<std::string>{"passed", "passed", "passed", "passed", "passed", "passed"}));
    std::vector<std::string> invoked;
    std::ifstream in(calls);
    // Up to full_bench's first: its case list, then its replicates.
    for (std::string line; std::getline(in, line) && !line.empty() && line != "full_bench";)
      invoked.push_back(line);
    const std::vector<std::string> expected =
        older ? std::vector<std::string>{"preflight", "load", "launch_geometry", "correctness", "quick_bench"}
              : std::vector<std::string>{"preflight"};
    EXPECT_EQ(invoked, expected);
    EXPECT_TRUE(report["cases"][0].contains("launches"));
    EXPECT_TRUE(report["cases"][0].contains("correctness"));
    if (!older) {
      for (std::size_t i = 1; i <= 4; ++i) EXPECT_EQ(report["stages"][i]["duration_ms"], 5) << i;
    }
  }
  unsetenv("KW_FAKE_CALLS");
}

TEST_F(PipelineTest, PtxasResourceReportGoesIntoBuildDetails) {
  json config = valid_config();
  config["build"]["commands"] = {
      "echo \"ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'\"; "
      "echo 'ptxas info    : Used 168 registers, used 1 barriers, 98304 bytes smem, 400 bytes cmem[0]'; "
      "echo 'ptxas info    : 0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads'"};
  json report = run(json::object(), false, config);
  json kernels = report["stages"][0]["details"]["kernels"];
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["name"], "_Z6kernelPf");
  EXPECT_EQ(kernels[0]["registers"], 168);
  EXPECT_EQ(kernels[0]["shared_bytes"], 98304);
  EXPECT_EQ(kernels[0]["spill_stores"], 8);
}

// Two worktrees of one project share the compiler cache: the second build
// compiles nothing (paths relative to each checkout). ccache is one of the
// packages `scripts/kw test` installs.
TEST(CompilerCache, WorktreesOfAProjectShareIt) {
  char pattern[] = "/tmp/kw-ccache-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  fs::path root = pattern;
  for (const char* tree : {"a", "b"}) {
    fs::create_directories(root / tree);
    std::ofstream(root / tree / "CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.20)\nproject(tiny CXX)\nadd_executable(tiny main.cpp)\n";
    std::ofstream(root / tree / "main.cpp") << "#include <cstdio>\nint main() { std::puts(\"tiny\"); }\n";
  }
  RepoConfig config;
  config.build_commands = {"cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release", "cmake --build build"};
  std::atomic<bool> stop{false};
  std::string output, cache;
  double seconds = 0;
  ASSERT_EQ(build_checkout(config, root / "a", stop, output, seconds, root / "ccache", &cache), "") << output;
  ASSERT_NE(cache.find("ccache ("), std::string::npos) << cache;
  ASSERT_EQ(build_checkout(config, root / "b", stop, output, seconds, root / "ccache", &cache), "") << output;
  common::ChildSpec stats = common::shell("ccache --print-stats", root, 30);
  stats.env = {{"CCACHE_DIR", (root / "ccache").string()}};
  common::ChildOutcome outcome = common::run_child(stats, stop);
  ASSERT_TRUE(outcome.ok()) << outcome.output_tail;
  auto counter = [&](const std::string& name) {
    std::size_t at = outcome.output_tail.find("\n" + name + "\t");
    return at == std::string::npos ? -1 : std::stoll(outcome.output_tail.substr(at + name.size() + 2));
  };
  // What tree a compiled (CMake's compiler checks too), tree b found.
  EXPECT_GE(counter("cache_miss"), 1) << outcome.output_tail;
  EXPECT_EQ(counter("direct_cache_hit") + counter("preprocessed_cache_hit"), counter("cache_miss"))
      << outcome.output_tail;
  // Without a cache directory the build is plain.
  EXPECT_TRUE(compiler_cache_env({}, root / "a", cache).empty());
  EXPECT_EQ(cache, "none");
  fs::remove_all(root);
}

// A scratch git repository for the build-tree tests, with commits made by
// writing files.
class ScratchRepo {
 public:
  ScratchRepo() : root_(kw::testing::make_temp_dir("kw-built")) {
    fs::create_directories(repo());
    git("init -q -b main");
  }
  ~ScratchRepo() { fs::remove_all(root_); }
  fs::path root() const { return root_; }
  fs::path repo() const { return root_ / "repo"; }
  std::string commit(const std::map<std::string, std::string>& files, const std::string& message) {
    for (const auto& [name, text] : files) std::ofstream(repo() / name) << text;
    git("add -A");
    git("commit -qm '" + message + "'");
    return git("rev-parse HEAD").substr(0, 40);
  }

 private:
  std::string git(const std::string& args) const {
    ChildOutcome outcome = run_child(shell("git -c user.name=t -c user.email=t@t " + args, repo(), 60), {});
    EXPECT_TRUE(outcome.ok()) << args << ": " << outcome.output_tail;
    return outcome.output_tail;
  }
  fs::path root_;
};

// A branch builds each next commit in its own tree, incrementally; a tree
// that built a commit serves it as a pull request's base until the branch
// moves on, then the base is built in a tree of its own. The bench links the
// project's shared library through an absolute RUNPATH into its build tree,
// which is why trees are never moved.
TEST(BuiltCommits, ABranchBuildsItsNextCommitIncrementallyAndBasesStayLoadable) {
  ScratchRepo scratch;
  const fs::path repo = scratch.repo();
  std::map<std::string, std::string> files = {
      {"CMakeLists.txt",
       "cmake_minimum_required(VERSION 3.20)\nproject(tiny CXX)\nadd_library(kernels SHARED kernels.cpp)\n"
       "add_executable(bench main.cpp)\ntarget_link_libraries(bench PRIVATE kernels)\n"},
      {"kernels.cpp", "int answer() { return 42; }\n"},
      {"main.cpp", "int answer();\nint main() { return answer() == 42 ? 0 : 1; }\n"},
      {".gitignore", "build/\n"},
      {"kernelwatch.json",
       R"({"project": "tiny", "build": {"commands": ["cmake -S . -B build -G Ninja", "cmake --build build"]},
           "benches": [{"name": "b", "path": "build/bench"}]})"}};
  const std::string first = scratch.commit(files, "first");

  std::vector<std::string> lines;
  auto log = [&](const std::string& line) { lines.push_back(line); };
  std::atomic<bool> stop{false};
  auto build = [&](const BuildTree& tree) {
    std::string output;
    double seconds = 0;
    EXPECT_EQ(
        build_checkout(load_repo_config(tree.path / "kernelwatch.json"), tree.path, stop, output, seconds),
        "")
        << output;
    return output;
  };
  auto bench_runs = [&](const fs::path& tree) {
    return run_child(shell("./build/bench", tree, 30), stop).ok();
  };

  BuiltCommits built(scratch.root() / "built", 3, {});
  BuildTree main_tree = built.checkout_for(repo, "tiny", "main", first, log);
  EXPECT_EQ(main_tree.path.parent_path(), scratch.root() / "built");
  EXPECT_EQ(main_tree.built_from, "");
  build(main_tree);
  built.finish(repo, main_tree, first, true);

  // A pull request based on `first` takes main's tree, and its bench loads.
  std::string why;
  std::optional<fs::path> base = built.get(repo, first, stop, log, why);
  ASSERT_TRUE(base) << why;
  EXPECT_EQ(*base, main_tree.path);
  EXPECT_TRUE(bench_runs(*base));
  built.finish(repo, main_tree, first, true);

  // The next main commit builds in the same tree: only what it changed.
  files["kernels.cpp"] = "int answer() { return 40 + 2; }\n";
  const std::string second = scratch.commit({{"kernels.cpp", files["kernels.cpp"]}}, "second");
  BuildTree next = built.checkout_for(repo, "tiny", "main", second, log);
  EXPECT_EQ(next.path, main_tree.path);
  EXPECT_EQ(next.built_from, first);
  EXPECT_NE(lines.back().find("incremental"), std::string::npos) << lines.back();
  std::string output = build(next);
  EXPECT_NE(output.find("kernels.cpp.o"), std::string::npos) << output;
  EXPECT_EQ(output.find("main.cpp.o"), std::string::npos) << output;
  EXPECT_TRUE(bench_runs(next.path));
  built.finish(repo, next, second, true);

  // `first` is no longer held by main's tree: it is built in its own, and
  // its bench loads its own library.
  base = built.get(repo, first, stop, log, why);
  ASSERT_TRUE(base) << why;
  EXPECT_EQ(*base, scratch.root() / "built" / first);
  EXPECT_TRUE(bench_runs(*base));
  built.finish(repo, next, second, true);

  // A re-run of `second` builds where it was built: nothing to compile.
  BuildTree rerun = built.checkout_for(repo, "tiny", "main", second, log);
  EXPECT_EQ(rerun.path, main_tree.path);
  EXPECT_EQ(rerun.built_from, second);
  EXPECT_NE(build(rerun).find("no work to do"), std::string::npos);
  built.finish(repo, rerun, second, true);

  // Another branch gets its own tree; over the capacity of 3 the least
  // recently used tree goes (the commit tree of `first`, used before main's).
  fs::path first_tree = scratch.root() / "built" / first;
  BuildTree feature = built.checkout_for(repo, "tiny", "feature/x", second, log);
  EXPECT_EQ(feature.path, main_tree.path) << "a built commit is taken where it is";
  built.finish(repo, feature, second, true);
  const std::string third = scratch.commit({{"main.cpp", files["main.cpp"] + "// third\n"}}, "third");
  feature = built.checkout_for(repo, "tiny", "feature/x", third, log);
  EXPECT_NE(feature.path, main_tree.path);
  EXPECT_NE(feature.path.filename().string().find("feature_x"), std::string::npos) << feature.path;
  build(feature);
  built.finish(repo, feature, third, true);
  EXPECT_TRUE(fs::exists(first_tree));
  const std::string fourth = scratch.commit({{"main.cpp", files["main.cpp"] + "// fourth\n"}}, "fourth");
  BuildTree fresh = built.checkout_for(repo, "tiny", "fresh", fourth, log);
  built.finish(repo, fresh, fourth, true);
  EXPECT_FALSE(fs::exists(first_tree));
  EXPECT_FALSE(fs::exists(scratch.root() / "built" / (first + ".kw")));
  for (const fs::path& kept : {main_tree.path, feature.path, fresh.path})
    EXPECT_TRUE(fs::exists(kept)) << kept;

  // A branch tree whose build failed stays for the branch's next commit; a
  // commit tree whose build failed is removed.
  const std::string fifth = scratch.commit({{"main.cpp", "does not compile\n"}}, "fifth");
  BuildTree failing = built.checkout_for(repo, "tiny", "main", fifth, log);
  EXPECT_EQ(failing.path, main_tree.path);
  EXPECT_EQ(failing.built_from, second);
  built.finish(repo, failing, fifth, false);
  EXPECT_TRUE(fs::exists(failing.path / ".git"));
  EXPECT_FALSE(built.get(repo, std::string(40, '0'), stop, log, why));
  EXPECT_NE(why.find("cannot check out 000000000000"), std::string::npos) << why;
}

// Two processes sharing one cache (a job's shards run with `kw run --base`,
// one on each GPU) ask for the same base at once: one builds it, the other
// waits and takes its tree. Without the cache's lock both checked the commit
// out into one worktree and one of them lost its base.
TEST(BuiltCommits, TwoProcessesAskingForOneBaseBuildItOnce) {
  ScratchRepo scratch;
  const fs::path builds = scratch.root() / "builds";
  const std::string config = R"({"project": "shared", "build": {"commands": ["echo built >> )" +
                             builds.string() + R"( && sleep 1"]}, "benches": [{"name": "b", "path": "b"}]})";
  const std::string base = scratch.commit({{"kernelwatch.json", config}}, "base");
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::vector<std::string> lines;
  auto ask = [&](std::optional<fs::path>& tree, std::string& why) {
    // A BuiltCommits of its own, as another process has: its own descriptor of the lock.
    BuiltCommits built(scratch.root() / "built", 4, {});
    tree = built.get(
        scratch.repo(), base, stop,
        [&](const std::string& line) {
          std::lock_guard lock(mutex);
          lines.push_back(line);
        },
        why);
  };
  std::optional<fs::path> first, second;
  std::string first_why, second_why;
  std::thread other([&] { ask(second, second_why); });
  ask(first, first_why);
  other.join();
  std::string said;
  for (const std::string& line : lines) said += line + "\n";
  ASSERT_TRUE(first) << first_why << "\n" << said;
  ASSERT_TRUE(second) << second_why << "\n" << said;
  EXPECT_EQ(*first, *second);
  std::ifstream in(builds);
  const std::string built_lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(built_lines, "built\n") << said;
  EXPECT_NE(said.find("another process holds the build cache"), std::string::npos) << said;
  EXPECT_NE(said.find("built commit from the cache"), std::string::npos) << said;
}

// A cache shared by two processes, one base tree each, room for one: the
// second's eviction passes over the tree the first still measures, and
// takes it once the first lets it go. Without the use lock the second
// removed the first's base from under its bench.
TEST(BuiltCommits, AnotherProcessNeverEvictsATreeInUse) {
  ScratchRepo scratch;
  const std::string config =
      R"({"project": "shared", "build": {"commands": ["true"]}, "benches": [{"name": "b", "path": "b"}]})";
  const std::string first = scratch.commit({{"kernelwatch.json", config}}, "first");
  const std::string second = scratch.commit({{"README", "second\n"}}, "second");
  std::atomic<bool> stop{false};
  const auto quiet = [](const std::string&) {};
  const fs::path cache = scratch.root() / "built";
  std::string why;
  // Each its own BuiltCommits, as each process has: its own descriptors.
  auto measuring = std::make_unique<BuiltCommits>(cache, 1);
  const std::optional<fs::path> in_use = measuring->get(scratch.repo(), first, stop, quiet, why);
  ASSERT_TRUE(in_use) << why;

  BuiltCommits other(cache, 1);
  const std::optional<fs::path> its_own = other.get(scratch.repo(), second, stop, quiet, why);
  ASSERT_TRUE(its_own) << why;
  EXPECT_TRUE(fs::exists(*in_use / "kernelwatch.json")) << "evicted while in use";
  BuildTree branch = other.checkout_for(scratch.repo(), "shared", "main", second, quiet);
  other.finish(scratch.repo(), branch, second, true);
  EXPECT_TRUE(fs::exists(*in_use / "kernelwatch.json")) << "evicted while in use";

  measuring.reset();                        // the first process is done with its base
  std::ofstream(cache / "gone.use") << "";  // a use file whose tree was evicted
  BuildTree again = other.checkout_for(scratch.repo(), "shared", "main", second, quiet);
  other.finish(scratch.repo(), again, second, true);
  EXPECT_FALSE(fs::exists(*in_use)) << "kept past the capacity once let go";
  EXPECT_TRUE(fs::exists(again.path / "kernelwatch.json"));
  std::vector<std::string> use_files;
  for (const auto& entry : fs::directory_iterator(cache))
    if (entry.path().extension() == ".use") use_files.push_back(entry.path().filename().string());
  EXPECT_EQ(use_files, std::vector<std::string>{again.path.filename().string() + ".use"});
}

// What an earlier commit left in a branch's tree must not fail the next
// commit's build: an incremental build that fails is retried from scratch,
// and kernelwatch.json's build.clean builds from scratch every time.
TEST(BuiltCommits, AnIncrementalBuildThatFailsIsRetriedFromScratch) {
  ScratchRepo scratch;
  auto config_with = [](const std::string& extra) {
    return R"({"project": "stale", "build": {"commands": ["sh build.sh"])" + extra +
           R"(}, "benches": [{"name": "b", "path": "build/bench"}]})";
  };
  const std::string first = scratch.commit({{".gitignore", "build/\n"},
                                            {"kernelwatch.json", config_with("")},
                                            {"build.sh", "mkdir -p build && echo v1 > build/generated\n"}},
                                           "first");
  // The second commit's build fails on the first's generated file.
  const std::string second =
      scratch.commit({{"build.sh",
                       "test ! -e build/generated || { echo 'build/generated is stale'; exit 1; }\n"
                       "mkdir -p build && echo v2 > build/version\n"}},
                     "second");
  const std::string third =
      scratch.commit({{"kernelwatch.json", config_with(R"(, "clean": true)")}}, "third");

  BuiltCommits built(scratch.root() / "built", 4, {});
  auto run_job = [&](const std::string& commit) {
    BuildTree tree = built.checkout_for(scratch.repo(), "stale", "main", commit, [](const std::string&) {});
    PipelineOptions options;
    options.checkout = tree.path;
    options.built_from = tree.built_from;
    options.clean_build_tree = [&tree] { BuiltCommits::clean(tree); };
    options.commit = commit;
    options.branch = "main";
    options.agent_name = "test";
    json report = run_pipeline(load_repo_config(tree.path / "kernelwatch.json"), options);
    built.finish(scratch.repo(), tree, commit, report["stages"][0]["status"] == "passed");
    return report["stages"][0];
  };
  json build = run_job(first);
  EXPECT_EQ(build["status"], "passed");
  EXPECT_EQ(build["details"]["tree"], (json{{"kind", "fresh"}}));

  build = run_job(second);
  EXPECT_EQ(build["status"], "passed") << build.dump(1);
  EXPECT_EQ(build["details"]["tree"]["kind"], "clean");
  EXPECT_NE(build["details"]["tree"]["reason"].get<std::string>().find("incremental build failed"),
            std::string::npos);
  EXPECT_NE(build["message"].get<std::string>().find("from scratch, after the incremental build failed"),
            std::string::npos);
  const std::string log = build["log_tail"];
  EXPECT_LT(log.find("build/generated is stale"), log.find("from scratch")) << log;

  build = run_job(third);
  EXPECT_EQ(build["status"], "passed");
  EXPECT_EQ(build["details"]["tree"], (json{{"kind", "clean"}, {"reason", "build.clean"}}));

  // A build that fails from scratch too is a build failure, with both logs.
  const std::string fourth = scratch.commit(
      {{"build.sh", "echo 'error: broken'; exit 1\n"}, {"kernelwatch.json", config_with("")}}, "fourth");
  build = run_job(fourth);
  EXPECT_EQ(build["status"], "failed");
  EXPECT_NE(build["message"].get<std::string>().find("`sh build.sh` exited 1"), std::string::npos) << build;
  EXPECT_NE(build["message"].get<std::string>().find("from scratch"), std::string::npos) << build;
  const std::string failed_log = build["log_tail"];
  EXPECT_LT(failed_log.find("error: broken"), failed_log.rfind("error: broken")) << failed_log;
}

TEST(Adapters, GoogleBenchmarkOutputOfTheInstalledLibrary) {
  fs::path out = fs::temp_directory_path() / ("kw-gbench-" + std::to_string(getpid()) + ".json");
  auto result =
      kw::testing::run_command({KW_GBENCH_SAMPLE, "--benchmark_repetitions=5", "--benchmark_min_time=0.01",
                                "--benchmark_out=" + out.string(), "--benchmark_out_format=json"});
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(out);
  json adapted = adapt_gbench(json::parse(in), "gb/");
  fs::remove(out);
  ASSERT_EQ(adapted["cases"].size(), 2u);
  EXPECT_EQ(adapted["cases"][0]["name"], "gb/BM_sum/1024");
  EXPECT_EQ(adapted["cases"][1]["name"], "gb/BM_manual/manual_time");
  for (const json& c : adapted["cases"]) {
    const json& m = c["measurements"][0];
    EXPECT_EQ(m["impl"], "candidate");
    EXPECT_EQ(m["samples_ns"].size(), 5u) << "one sample per repetition, aggregates skipped";
    EXPECT_GT(m["median_ns"].get<double>(), 0);
  }
  // CPU time is judged by the fastest repetition, GPU events as kwbench's are.
  EXPECT_EQ(adapted["cases"][0]["measurements"][0]["replicate_location"], "minimum");
  EXPECT_FALSE(adapted["cases"][1]["measurements"][0].contains("replicate_location"));
}

TEST(Adapters, GoogleBenchmarkUnitsAndErrors) {
  json output{{"benchmarks",
               {{{"name", "BM_a"},
                 {"run_name", "BM_a"},
                 {"run_type", "iteration"},
                 {"real_time", 2.5},
                 {"time_unit", "us"}},
                {{"name", "BM_a_mean"},
                 {"run_name", "BM_a"},
                 {"run_type", "aggregate"},
                 {"real_time", 9},
                 {"time_unit", "us"}}}}};
  json adapted = adapt_gbench(output, "");
  EXPECT_EQ(adapted["cases"][0]["measurements"][0]["samples_ns"], json({2500.0}));
  EXPECT_EQ(adapted["cases"][0]["params"]["clock"], "real") << "no CPU time in the output";
  // A CPU benchmark's sample is its CPU time; one that asks for real or
  // manual time keeps it.
  output["benchmarks"][0]["cpu_time"] = 2.0;
  adapted = adapt_gbench(output, "");
  EXPECT_EQ(adapted["cases"][0]["measurements"][0]["samples_ns"], json({2000.0}));
  EXPECT_EQ(adapted["cases"][0]["params"]["clock"], "cpu");
  for (const char* suffix : {"/real_time", "/manual_time"}) {
    json timed = output;
    timed["benchmarks"][0]["run_name"] = std::string("BM_a") + suffix;
    adapted = adapt_gbench(timed, "");
    EXPECT_EQ(adapted["cases"][0]["measurements"][0]["samples_ns"], json({2500.0})) << suffix;
    EXPECT_EQ(adapted["cases"][0]["measurements"][0].contains("replicate_location"),
              std::string(suffix) == "/real_time")
        << suffix;
  }
  output["benchmarks"][0]["error_occurred"] = true;
  output["benchmarks"][0]["error_message"] = "cudaErrorIllegalAddress";
  EXPECT_THROW(adapt_gbench(output, ""), std::runtime_error);
  EXPECT_THROW(adapt_gbench(json::object(), ""), std::runtime_error);
}

json adapt_fixture(const std::string& name, const fs::path& dir = KW_TEST_DATA_DIR "/nvbench-h100") {
  fs::path file = dir / name;
  std::ifstream in(file);
  return adapt_nvbench(json::parse(in), file, "nv/");
}

// Real NVBench output (tests/data/nvbench-h100, recorded on an H100).
TEST(Adapters, NvbenchTakesTheDeviceAndEverySampleWithItsClock) {
  json adapted = adapt_fixture("throughput.json");
  EXPECT_EQ(adapted["device"], json({{"name", "NVIDIA H100 80GB HBM3"},
                                     {"kind", "gpu"},
                                     {"compute_capability", "9.0"},
                                     {"memory_bytes", 85017493504LL},
                                     {"sm_count", 132},
                                     {"l2_bytes", 52428800}}));
  ASSERT_EQ(adapted["cases"].size(), 1u);
  json c = adapted["cases"][0];
  EXPECT_EQ(c["name"], "nv/throughput_bench");
  json m = c["measurements"][0];
  ASSERT_EQ(m["samples_ns"].size(), 40u);
  // 0.127 ms per sample on the H100, as NVBench's own log said.
  EXPECT_NEAR(m["median_ns"].get<double>(), 127000, 3000);
  ASSERT_EQ(m["sm_mhz"].size(), 40u);
  EXPECT_NEAR(m["sm_mhz"][0].get<double>(), 1979.5, 1);
  EXPECT_TRUE(adapted["notes"].empty()) << adapted["notes"];
  // What the report validator accepts.
  json report = kw::testing::make_report({});
  report["device"] = adapted["device"];
  report["cases"] = adapted["cases"];
  EXPECT_NO_THROW(common::parse_run_report(report));
}

TEST(Adapters, NvbenchCaseNamesAreCleanAndParamsTyped) {
  json adapted = adapt_fixture("axes.json");
  ASSERT_EQ(adapted["cases"].size(), 17u);  // 6 types, 11 durations
  EXPECT_EQ(adapted["cases"][0]["name"], "nv/copy_type_sweep/T=U8");
  EXPECT_EQ(adapted["cases"][0]["params"]["T"], "U8");
  json duration = adapted["cases"][7];
  EXPECT_EQ(duration["name"], "nv/single_float64_axis/Duration=0.0001");
  EXPECT_EQ(duration["params"]["Duration"], 0.0001);
  for (const json& c : adapted["cases"]) {
    EXPECT_EQ(c["name"].get<std::string>().find(' '), std::string::npos) << c["name"];
    EXPECT_FALSE(c["params"].contains("device")) << "one GPU: no per-case device";
  }
}

TEST(Adapters, NvbenchLeavesOutWhatTheBenchmarkSkippedAndSaysSo) {
  json adapted = adapt_fixture("skip.json");
  std::ifstream in(KW_TEST_DATA_DIR "/nvbench-h100/skip.json");
  json raw = json::parse(in);
  std::size_t states = 0, skipped = 0;
  for (const json& bench : raw["benchmarks"]) {
    for (const json& state : bench["states"]) {
      ++states;
      skipped += state.value("is_skipped", false) ? 1 : 0;
    }
  }
  ASSERT_GT(skipped, 0u);
  EXPECT_EQ(adapted["cases"].size(), states - skipped);
  // Named as NVBench names them, with its reason, the first five.
  EXPECT_EQ(
      adapted["notes"].back().get<std::string>().rfind(
          std::to_string(skipped) + " state(s) skipped by the benchmark itself: runtime_skip [Device=0 "
                                    "Duration=0.0005 Kramble=Foo] (Long 'Foo' benchmarks are skipped.), ",
          0),
      0u)
      << adapted["notes"].back();
  EXPECT_EQ(adapted["cases"][0]["name"], "nv/runtime_skip/Duration=0/Kramble=Foo");
}

// A replicate of NVBench: kernelwatch's stopping criterion and per-state
// budget before the bench's own arguments (which win, and keep their own
// criterion), then the benchmarks in the order asked.
TEST(Adapters, NvbenchPassArgumentsSetTheBudgetAndTheOrder) {
  BenchConfig bench;
  bench.args = {"-a", "Duration=0.002"};
  FullBenchConfig fb;
  fb.noise_target = 0.005;
  fb.replicate_seconds = 0.25;
  fb.min_samples = 10;
  EXPECT_EQ(
      nvbench_pass_args(bench, fb, {"second", "first"}),
      (std::vector<std::string>{"--stopping-criterion", "stdrel", "--max-noise", "0.500000", "--min-time",
                                "0.250000", "--min-samples", "10", "--timeout", "2.000000", "--no-batch",
                                "-a", "Duration=0.002", "-b", "second", "-b", "first"}));
  bench.args = {"--stopping-criterion", "sample-count", "--target-samples", "50"};
  const std::vector<std::string> own = nvbench_pass_args(bench, fb, {});
  EXPECT_EQ(std::count(own.begin(), own.end(), "--stopping-criterion"), 1) << "NVBench refuses a second one";
}

TEST(Adapters, NvbenchListNamesTheBenchmarks) {
  const std::string listing =
      "# Devices\n\n## [0] `NVIDIA H100 80GB HBM3`\n* SM Version: 900\n\n# Benchmarks\n\n"
      "## [0] `throughput_bench` (4 configurations)\n\n### Axes\n\n* `Stride` : int64\n  * `1`\n"
      "## [1] `copy_sweep_grid_shape` (12 configurations)\n";
  EXPECT_EQ(nvbench_benchmarks_of_list(listing),
            (std::vector<std::string>{"throughput_bench", "copy_sweep_grid_shape"}));
}

TEST(Adapters, GbenchFilterMatchesExactlyTheNamesAsked) {
  const std::string filter = gbench_filter({"BM_sum/1024", "BM_manual/manual_time", "BM_x<int>/threads:2"});
  EXPECT_EQ(filter, "^(BM_sum/1024|BM_manual/manual_time|BM_x<int>/threads:2)$");
  EXPECT_EQ(gbench_filter({"BM_a.b(c)+"}), "^(BM_a\\.b\\(c\\)\\+)$");
}

TEST(Adapters, NvbenchKeepsCpuOnlyBenchmarks) {
  json adapted = adapt_fixture("cpu_only.json");
  ASSERT_EQ(adapted["cases"].size(), 3u);
  for (const json& c : adapted["cases"]) {
    EXPECT_EQ(c["params"]["cpu_only"], true);
    ASSERT_EQ(c["measurements"][0]["samples_ns"].size(), 10u) << c["name"];
    // Each sleeps 2 ms on the host.
    EXPECT_NEAR(c["measurements"][0]["median_ns"].get<double>(), 2.1e6, 0.2e6) << c["name"];
    EXPECT_FALSE(c["measurements"][0].contains("sm_mhz"));
    EXPECT_FALSE(c["params"].contains("device"));
  }
  EXPECT_EQ(adapted["device"]["name"], "NVIDIA H100 80GB HBM3");
  // NVBench leaves a cpu_only state's device id uninitialised (garbage in
  // the fixture): no case is said to have run on another GPU.
  EXPECT_TRUE(adapted["notes"].empty()) << adapted["notes"];
}

TEST(Adapters, NvbenchFallsBackToTheMeanAndSaysWhy) {
  json summary_only = adapt_fixture("throughput-summary-only.json");
  ASSERT_EQ(summary_only["cases"].size(), 1u);
  EXPECT_EQ(summary_only["cases"][0]["measurements"][0]["samples_ns"].size(), 1u);
  EXPECT_NEAR(summary_only["cases"][0]["measurements"][0]["median_ns"].get<double>(), 127000, 3000);
  EXPECT_EQ(summary_only["notes"][0],
            "nv/throughput_bench: no per-sample times in the output; one sample, NVBench's mean");

  // A sidecar that failed to write: the summary stands in, said so.
  fs::path dir = kw::testing::make_temp_dir("kw-nvbench");
  fs::copy_file(KW_TEST_DATA_DIR "/nvbench-h100/throughput.json", dir / "throughput.json");
  json missing = adapt_fixture("throughput.json", dir);
  ASSERT_EQ(missing["cases"].size(), 1u);
  EXPECT_EQ(missing["cases"][0]["measurements"][0]["samples_ns"].size(), 1u);
  EXPECT_EQ(missing["notes"][0],
            "nv/throughput_bench: its sample file could not be read; one sample, NVBench's mean");
  fs::remove_all(dir);
}

// A large report's parts: each within the part size, the first with every
// field, in order they make the report again; the same report to the same
// target names the same upload.
TEST(ReportUpload, PartsFitAndMakeTheReportAgain) {
  testing::ReportSpec spec;
  spec.commit = testing::make_commit(3);
  spec.cases = 200;
  spec.replicates = 3;
  spec.samples = 20;
  const json report = testing::make_report(spec);
  constexpr std::size_t kPart = std::size_t{32} * 1024;
  const ReportParts parts = split_report("/api/v1/runs", report, kPart);
  ASSERT_GE(parts.gzipped.size(), 3u);
  json rebuilt;
  for (std::size_t k = 0; k < parts.gzipped.size(); ++k) {
    EXPECT_LE(parts.gzipped[k].size(), kPart) << "part " << k;
    json part = json::parse(http::gzip_decompress(parts.gzipped[k], std::size_t{1} << 30));
    if (k == 0) {
      rebuilt = part;
      continue;
    }
    EXPECT_EQ(part.size(), 1u) << "a later part holds only cases";
    for (json& one : part["cases"]) rebuilt["cases"].push_back(std::move(one));
  }
  EXPECT_EQ(rebuilt, report);
  EXPECT_EQ(split_report("/api/v1/runs", report, kPart).upload, parts.upload);
  EXPECT_NE(split_report("/api/v1/jobs/4/report", report, kPart).upload, parts.upload);
  EXPECT_THROW(split_report("/api/v1/runs", report, 256), std::runtime_error);
}

}  // namespace
}  // namespace kw::agent

namespace kw::agent {
namespace {

json launch(const std::string& kernel, json block, json grid, int registers, int dynamic_smem) {
  return {{"kernel", kernel},       {"grid", std::move(grid)}, {"block", std::move(block)},
          {"registers", registers}, {"static_smem", 0},        {"dynamic_smem", dynamic_smem},
          {"duration_ns", 1000}};
}

LaunchExpectation expect(const std::string& kernel) {
  LaunchExpectation e;
  e.kernel = kernel;
  return e;
}

TEST(LaunchCheck, ExpectationsHoldOrSayWhatWasLaunched) {
  const std::vector<json> launches = {
      launch("void fill<float>(float*, int)", {256, 1, 1}, {40, 1, 1}, 16, 0),
      launch("void gemm_kernel<128, 4>(Params)", {128, 1, 1}, {64, 8, 1}, 168, 98304),
      launch("void gemm_kernel<128, 4>(Params)", {128, 1, 1}, {64, 8, 1}, 168, 98304)};
  LaunchExpectation gemm = expect("*gemm_kernel<128,*");
  gemm.block = {{128, 1, 1}};
  gemm.grid = {{64, 8, 1}};
  gemm.max_registers = 168;
  gemm.max_shared_bytes = 98304;
  LaunchCheck ok = check_launches({gemm}, launches);
  EXPECT_TRUE(ok.passed) << ok.message;
  EXPECT_EQ(ok.message, "3 launches of 2 kernels; 1 expectations met");
  EXPECT_EQ(ok.details[0]["launches"], 2);

  // The 8-warp variant's budget: a wrong block, registers and shared memory, each said once.
  LaunchExpectation tuned = gemm;
  tuned.block = {{256, 1, 1}};
  tuned.max_registers = 128;
  tuned.max_shared_bytes = 49152;
  LaunchCheck wrong = check_launches({tuned}, launches);
  EXPECT_FALSE(wrong.passed);
  EXPECT_EQ(wrong.message,
            "void gemm_kernel<128, 4>(Params): block (128,1,1), expected (256,1,1); "
            "void gemm_kernel<128, 4>(Params): 168 registers per thread, at most 128 expected; "
            "void gemm_kernel<128, 4>(Params): 98304 bytes of shared memory, at most 49152 expected");

  LaunchCheck missing = check_launches({expect("*gemm_kernel<256,*")}, launches);
  EXPECT_FALSE(missing.passed);
  EXPECT_EQ(
      missing.message,
      "no launch of a kernel matching \"*gemm_kernel<256,*\"; observed: void fill<float>(float*, int) x1, "
      "void gemm_kernel<128, 4>(Params) x2");
  LaunchExpectation optional = expect("*fallback*");
  optional.must_launch = false;
  EXPECT_TRUE(check_launches({optional}, launches).passed);
}

TEST(LaunchCheck, ARefusedLaunchIsExplainedWithItsNumbers) {
  EXPECT_EQ(
      explain_refused_launch(
          json::parse(R"j({"kernel": "tile_kernel(float*)", "error": "CUDA_ERROR_INVALID_VALUE",
      "grid": [1, 1, 1], "block": [256, 1, 1], "dynamic_smem": 163840, "static_smem": 0,
      "max_dynamic_smem": 49152, "max_threads_per_block": 1024, "registers": 10})j")),
      "the launch of tile_kernel(float*) was refused (CUDA_ERROR_INVALID_VALUE): 163840 bytes of dynamic "
      "shared memory asked, 49152 allowed (raise it with cudaFuncSetAttribute(MaxDynamicSharedMemorySize))");
  EXPECT_EQ(
      explain_refused_launch(json::parse(R"j({"kernel": "k()", "error": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
      "grid": [8, 1, 1], "block": [1024, 1, 1], "dynamic_smem": 0, "max_dynamic_smem": 49152,
      "max_threads_per_block": 640, "registers": 96
  })j")),
      "the launch of k() was refused (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES): a block of 1024 threads, at most "
      "640 for this kernel at 96 registers per thread");
  EXPECT_EQ(
      explain_refused_launch(json::parse(R"j({"kernel": "k()", "error": "CUDA_ERROR_INVALID_VALUE",
      "grid": [0, 1, 1], "block": [32, 1, 1], "dynamic_smem": 0
  })j")),
      "the launch of k() was refused (CUDA_ERROR_INVALID_VALUE): grid (0,1,1), block (32,1,1), 0 bytes of "
      "dynamic shared memory");
}

// A python bench marks each case's launches in the records; each case is held
// to its own declared launch.
TEST(LaunchCheck, MarkedLaunchesAreHeldToTheirCasesDeclarations) {
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-inject-marks");
  std::ofstream(dir / "launches-20.jsonl")
      << R"({"start": {"pid": 20, "exe": "/usr/bin/python3"}})"
      << "\n"
      << launch("at_import()", {1, 1, 1}, {1, 1, 1}, 8, 0).dump() << "\n"
      << R"({"mark": "case a"})"
      << "\n"
      << launch("scale_kernel(float*)", {256, 1, 1}, {1056, 1, 1}, 16, 0).dump() << "\n"
      << R"({"mark": "end"})"
      << "\n"
      << R"({"mark": "case b"})"
      << "\n"
      << launch("scale_kernel(float*)", {128, 1, 1}, {1056, 1, 1}, 16, 0).dump() << "\n"
      << R"({"mark": "end"})"
      << "\n"
      << R"({"end": {"pid": 20, "launches": 3, "dropped": 0}})"
      << "\n";
  InjectedLaunches observed = read_injected_launches(dir);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(observed.launches.size(), 3u);
  EXPECT_FALSE(observed.launches[0].contains("mark"));
  EXPECT_EQ(observed.launches[1]["mark"], "case a");

  BenchConfig bench;
  bench.name = "py";
  BenchResult result;
  result.details = {{"cases", json::array()}};  // the bench's own per-case results stay as they are
  const json expected{{"kernel_pattern", "scale_kernel*"}, {"block", {256, 1, 1}}, {"max_registers", 32}};
  result.cases = {{{"name", "a"}, {"expected_launch", expected}},
                  {{"name", "b"}, {"expected_launch", expected}}};
  check_marked_launches(result, bench, observed);
  EXPECT_EQ(result.status, "failed");
  EXPECT_EQ(result.message,
            "py: 1 of 2 cases launched otherwise than declared: b: scale_kernel(float*): block (128,1,1), "
            "expected (256,1,1)");
  ASSERT_EQ(result.cases[0]["launches"].size(), 1u) << "only the launches between its marks";
  EXPECT_EQ(result.details["expectations"]["b"][0]["launches"], 1) << result.details;
  EXPECT_FALSE(result.cases[0]["launches"][0].contains("mark"));

  BenchResult passing;
  passing.cases = {{{"name", "a"}, {"expected_launch", expected}}};
  check_marked_launches(passing, bench, observed);
  EXPECT_EQ(passing.status, "passed");
  EXPECT_EQ(passing.message, "py: 3 launches; 1 of 1 cases launched as declared");

  // An autotuned kernel (Triton) declares no block: its name is still held.
  BenchResult autotuned;
  autotuned.cases = {{{"name", "a"}, {"expected_launch", {{"kernel_pattern", "scale_kernel*"}}}},
                     {{"name", "b"}, {"expected_launch", {{"kernel_pattern", "softmax_kernel*"}}}}};
  check_marked_launches(autotuned, bench, observed);
  EXPECT_EQ(autotuned.status, "failed");
  EXPECT_NE(autotuned.message.find("b: no launch of a kernel matching \"softmax_kernel*\""),
            std::string::npos)
      << autotuned.message;
  EXPECT_EQ(autotuned.message.find("a:"), std::string::npos) << autotuned.message;
}

TEST(LaunchCheck, IncompleteRecordsAreNamed) {
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-inject-records");
  const std::string kernel = launch("k()", {32, 1, 1}, {1, 1, 1}, 8, 0).dump();
  std::ofstream(dir / "launches-10.jsonl") << R"({"start": {"pid": 10, "exe": "/repo/bench"}})"
                                           << "\n"
                                           << kernel << "\n"
                                           << R"({"end": {"pid": 10, "launches": 1, "dropped": 0}})"
                                           << "\n";
  {
    InjectedLaunches complete = read_injected_launches(dir);
    EXPECT_EQ(complete.processes, 1);
    EXPECT_EQ(complete.launches.size(), 1u);
    EXPECT_TRUE(complete.problems.empty());
  }
  std::ofstream(dir / "launches-11.jsonl") << R"({"start": {"pid": 11, "exe": "/repo/child"}})"
                                           << "\n"
                                           << kernel << "\n"
                                           << R"({"kern)";
  std::ofstream(dir / "launches-12.jsonl")
      << R"({"start": {"pid": 12, "exe": "/repo/other"}})"
      << "\n"
      << R"({"error": "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_NOT_INITIALIZED"})"
      << "\n"
      << R"({"end": {"pid": 12, "launches": 0, "dropped": 3}})"
      << "\n";
  InjectedLaunches broken = read_injected_launches(dir);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(broken.processes, 3);
  EXPECT_EQ(broken.launches.size(), 2u);
  std::sort(broken.problems.begin(), broken.problems.end());
  EXPECT_EQ(broken.problems, (std::vector<std::string>{
                                 "/repo/child ended without a normal exit: its last launches may be missing",
                                 "/repo/other: CUPTI dropped 3 launch records",
                                 "/repo/other: launch tracing failed: "
                                 "cuptiActivityEnable(CONCURRENT_KERNEL): CUPTI_ERROR_NOT_INITIALIZED",
                                 "launches-11.jsonl line 3: not JSON (the process was cut off)"}));
}

}  // namespace
}  // namespace kw::agent

namespace kw::agent {
namespace {

TEST(LoadCheck, KernelImagesThisGpuCanRun) {
  const KernelImages sm90 =
      parse_image_lists("ELF file    1: bench.1.sm_90.cubin\nELF file    2: bench.2.sm_90.cubin\n",
                        "PTX file    1: bench.1.sm_90.ptx\n");
  EXPECT_EQ(sm90.sass, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(sm90.ptx, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(image_problem(sm90, "9.0"), "");
  EXPECT_EQ(image_problem(sm90, "8.0"),
            "no kernel image for sm_80 (compute capability 8.0): it has SASS for sm_90 and PTX for sm_90");
  EXPECT_EQ(image_problem(sm90, "10.0"), "") << "its PTX is compiled at load";
  const KernelImages sass_only =
      parse_image_lists("ELF file    1: x.1.sm_80.cubin\nELF file    2: x.2.sm_90a.cubin\n", "");
  EXPECT_EQ(sass_only.sass, (std::vector<std::string>{"sm_80", "sm_90a"}));
  EXPECT_EQ(image_problem(sass_only, "8.6"), "") << "sm_80 SASS runs on 8.6";
  EXPECT_EQ(image_problem(sass_only, "9.0"), "") << "sm_90a runs on exactly 9.0";
  EXPECT_EQ(image_problem(sass_only, "10.0"),
            "no kernel image for sm_100 (compute capability 10.0): it has SASS for sm_80, sm_90a and PTX "
            "for none");
  EXPECT_TRUE(parse_image_lists("", "").sass.empty());
}

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(KW_TEST_DATA_DIR) + "/cuobjdump-h100/" + name);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// cuobjdump of CUDA 13.0 on the GPU machine (tools/capture-cuobjdump-fixtures.sh).
TEST(LoadCheck, RealCuobjdumpOutputOfTheAttentionLibraryAndOfAHostOnlyBinary) {
  const KernelImages attention = parse_image_lists(fixture("libkw_attention.so.list-elf.txt"),
                                                   fixture("libkw_attention.so.list-ptx.txt"));
  EXPECT_EQ(attention.sass, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(attention.ptx, std::vector<std::string>{"sm_90"});
  EXPECT_EQ(image_problem(attention, "9.0"), "");
  EXPECT_NE(image_problem(attention, "8.9"), "");
  const std::string usage = fixture("libkw_attention.so.dump-resource-usage.txt");
  EXPECT_TRUE(resource_problems(usage).empty());
  // Raised past the limit by hand.
  std::string over = usage;
  over.replace(over.find("REG:252"), 7, "REG:300");
  EXPECT_EQ(resource_problems(over),
            std::vector<std::string>{
                "void kw::attention::attention_forward_kernel<kw::attention::ForwardTraits<128, 128, 64, "
                "4, 2, 0>, "
                "__half, false>(kw::attention::ForwardParams): 300 registers per thread, at most 255"});
  const KernelImages host_only = parse_image_lists(fixture("kw.list-elf.txt"), fixture("kw.list-ptx.txt"));
  EXPECT_TRUE(host_only.sass.empty() && host_only.ptx.empty());
}

TEST(LoadCheck, KernelsOverTheLimitsOfEveryLaunch) {
  const std::string usage = R"(
Fatbin elf code:
================
arch = sm_90
Resource usage:
 Common:
  GLOBAL:0
 Function _Z6scaledPfi:
  REG:32 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:368 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z4hugePf:
  REG:40 STACK:0 SHARED:65536 LOCAL:0 CONSTANT[0]:360 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function greedy: REG:256 STACK:0 SHARED:0 LOCAL:0
)";
  EXPECT_EQ(resource_problems(usage),
            (std::vector<std::string>{"huge(float*): 65536 bytes of static shared memory, at most 49152",
                                      "greedy: 256 registers per thread, at most 255"}));
}

}  // namespace
}  // namespace kw::agent

namespace kw::agent {
namespace {

// memcheck's report of the harness's broken.overrun case as kw quoted it on
// the H100, with a second error after it: the first block, at most seven
// lines, without the prefixes.
TEST(Sanitize, TheFirstReportIsQuoted) {
  const std::string output = R"(========= COMPUTE-SANITIZER
kwbench correctness started on NVIDIA H100 80GB HBM3
========= Invalid __global__ write of size 4 bytes
=========     at kwbench_selftest::scale_overrun_kernel(const float *, float *, float, unsigned long)+0x280
=========     by thread (23,0,0) in block (392,0,0)
=========     Access to 0x7fb32dfff060 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7fb32a000000 of size 67,104,864 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: kwbench_selftest::ScaleCase::run_candidate(kwbench::State&) [0x367c3] in bench
=========         Host Frame: kwbench::correctness_of(kwbench::Prepared&) [0x2a1c0] in bench
=========
========= Invalid __global__ write of size 4 bytes
========= ERROR SUMMARY: 2 errors
)";
  EXPECT_EQ(
      first_sanitizer_report(output),
      "Invalid __global__ write of size 4 bytes\n"
      "    at kwbench_selftest::scale_overrun_kernel(const float *, float *, float, unsigned long)+0x280\n"
      "    by thread (23,0,0) in block (392,0,0)\n"
      "    Access to 0x7fb32dfff060 is out of bounds\n"
      "    and is 1 bytes after the nearest allocation at 0x7fb32a000000 of size 67,104,864 bytes\n"
      "    Saved host backtrace up to driver entry point at kernel launch time\n"
      "        Host Frame: kwbench_selftest::ScaleCase::run_candidate(kwbench::State&) [0x367c3] in bench");
  EXPECT_EQ(first_sanitizer_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"), "");
}

}  // namespace
// kw profile's summary of real ncu output (tests/data/ncu-h100): the tuned
// attention kernel's four launches, units ns, numbers with separators.
TEST(Profile, NcuCsvOfTheAttentionKernelIsSummarized) {
  std::ifstream in(KW_TEST_DATA_DIR "/ncu-h100/attention-fp16-d128-b4h16s4096.csv");
  std::stringstream text;
  text << in.rdbuf();
  // Among the bench's own lines and ncu's, as kw profile reads them.
  const std::string csv = ncu_csv_of("[kwbench] stage full_bench started\n==PROF== Connected to process\n" +
                                     text.str() + "==PROF== Disconnected\n");
  const json kernels = summarize_ncu_csv(csv);
  ASSERT_EQ(kernels.size(), 1u) << kernels.dump(2);
  const std::string name =
      "void attention_forward_kernel<ForwardTraits<128, 128, 64, 4, 2, 0>, __half, 0>(ForwardParams)";
  ASSERT_TRUE(kernels.contains(name)) << kernels.dump(2);
  const json& k = kernels[name];
  EXPECT_EQ(k["launches"], 4);
  EXPECT_NEAR(k["time_us"].get<double>(), 1820.7, 0.1);
  EXPECT_NEAR(k["sm_pct"].get<double>(), 58.2, 0.1);
  EXPECT_NEAR(k["memory_pct"].get<double>(), 52.3, 0.1);
  EXPECT_NEAR(k["occupancy_pct"].get<double>(), 12.2, 0.1);
  ASSERT_EQ(k["stalls"].size(), 3u);
  EXPECT_EQ(k["stalls"][0]["reason"], "wait");
  EXPECT_GE(k["stalls"][0]["cycles_per_issue"].get<double>(),
            k["stalls"][1]["cycles_per_issue"].get<double>());

  const json summary{{"case", "attention/fp16/d128/b4h16s4096"},
                     {"head", {{"commit", std::string(40, 'c')}, {"kernels", kernels}}}};
  const std::string table = profile_markdown(summary);
  EXPECT_NE(table.find("| head cccccccc | 4 | 1820.7 | 58.2 | 52.3 | 12.2 | wait "), std::string::npos)
      << table;
  EXPECT_THROW(summarize_ncu_csv("\"ID\",\"Kernel Name\"\n"), std::runtime_error);
  EXPECT_EQ(profile_headline(summary),
            "`" + name +
                "`: time 1820.7 us, SM 58.2%, memory 52.3%, achieved occupancy 12.2%, "
                "top stall wait 1.94");
}

// The regression explanation's own example on the H100: D launches the
// 8-warp variant where A launched the tuned kernel; the headline compares
// the head's kernel with the one it replaced.
TEST(Profile, AVariantSwappedInIsComparedWithTheKernelItReplaced) {
  std::ifstream in(KW_TEST_DATA_DIR "/ncu-h100/variant-8warp-profile.json");
  const json summary = json::parse(in);
  EXPECT_EQ(
      profile_headline(summary),
      "`void attention_forward_kernel<ForwardTraits<128, 128, 64, 8, 1, 0>, __half, 0>(ForwardParams)` in "
      "place of `void attention_forward_kernel<ForwardTraits<128, 128, 64, 4, 2, 0>, __half, "
      "0>(ForwardParams)`: time 1465.7 -> 1911.7 us, SM 58.0 -> 44.0%, memory 52.1 -> 62.6%, achieved "
      "occupancy 12.2 -> 12.5%, top stall wait 1.74");
  const std::string table = profile_markdown(summary);
  EXPECT_NE(table.find("| 0 | not launched |"), std::string::npos) << table;
}

}  // namespace kw::agent
