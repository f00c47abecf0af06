// kernelwatch.json as the agent reads it, a pass merged as a replicate, and
// the process groups every stage runs in.
#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

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
            "benches[0].format: unknown value \"criterion\" (expected kwbench, gbench, nvbench, python, "
            "perf_report, do_bench, tritonbench)");
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

  // A perf_report script: kwbench.py runs it, with the candidate provider named.
  json perf_report = valid_config();
  perf_report["benches"][0] = {{"name", "softmax"},
                               {"path", "python/tutorials/02-fused-softmax.py"},
                               {"format", "perf_report"},
                               {"candidate", "triton"}};
  const BenchConfig script = parse_repo_config(perf_report).benches[0];
  EXPECT_EQ(script.format, BenchFormat::python);
  EXPECT_EQ(
      bench_command(script, "/checkout"),
      (std::vector<std::string>{"python3", "-m", "kwbench", "--perf-report",
                                "/checkout/python/tutorials/02-fused-softmax.py", "--candidate", "triton"}));
  EXPECT_EQ(config_error([](json& c) { c["benches"][0]["candidate"] = "triton"; }),
            "benches[0].candidate: only a perf_report, do_bench or tritonbench bench names a candidate");
  // run_args: the bench's own, over the project's, passed to kwbench.py.
  json with_run_args = perf_report;
  with_run_args["run_args"] = {{"dtype", "torch.float32"}, {"y_size", "16"}};
  with_run_args["benches"][0]["run_args"] = {{"dtype", "torch.float16"}};
  const std::vector<std::string> argv =
      bench_command(parse_repo_config(with_run_args).benches[0], "/checkout");
  EXPECT_EQ(std::vector<std::string>(argv.end() - 2, argv.end()),
            (std::vector<std::string>{"--run-arg=dtype=torch.float16", "--run-arg=y_size=16"}));
  EXPECT_EQ(config_error([](json& c) {
              c["benches"][0]["run_args"] = {{"dtype", "torch.float16"}};
            }),
            "benches[0].run_args: only a perf_report bench passes its benchmark functions keywords");
  with_run_args["run_args"] = {{"dtype", 16}};
  try {
    parse_repo_config(with_run_args);
    ADD_FAILURE() << "a number as a run_args expression was accepted";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("run_args.dtype"), std::string::npos) << error.what();
  }
  perf_report["benches"][0]["format"] = "do_bench";
  EXPECT_EQ(bench_command(parse_repo_config(perf_report).benches[0], "/checkout")[3], "--do-bench");
  perf_report["benches"][0]["format"] = "tritonbench";
  perf_report["benches"][0]["path"] = "tritonbench/operators/softmax/operator.py";
  EXPECT_EQ(bench_command(parse_repo_config(perf_report).benches[0], "/checkout"),
            (std::vector<std::string>{"python3", "-m", "kwbench", "--tritonbench",
                                      "/checkout/tritonbench/operators/softmax/operator.py", "--candidate",
                                      "triton"}));
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

}  // namespace
}  // namespace kw::agent
