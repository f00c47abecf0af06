// The stage pipeline over the fake kwbench (a CPU TEST DOUBLE of a bench):
// stages, replicates, A/B, python benches, shards, timeouts.
#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

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
// server, which a claimed job carries (its per-case thresholds, and its
// detection settings' min_threshold). A head 5% slower is screened at the
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
  for (const char* project : {"none", "thresholds", "detection"}) {
    PipelineOptions options = ab_options(base);
    options.only_stages = {common::StageName::full_bench};
    if (std::string(project) == "thresholds") options.project_thresholds = common::Thresholds{0.2, {}};
    if (std::string(project) == "detection") options.detection.min_threshold = 0.2;
    const bool screened = std::string(project) == "none";
    const json report = run_pipeline(parse_repo_config(config), options);
    const json& c = report["cases"][0];
    EXPECT_EQ(c.contains("first_pass_replicates"), screened) << project << " " << c.dump().substr(0, 300);
    EXPECT_EQ(c["measurements"][0]["replicates"].back(), screened ? 4 : 2) << project;
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

// A/B: the base's tree (named by its commit) and the head's (by its branch)
// are reached through paths of one length, so that no process of one side
// starts with longer argv strings than the other's. The bench is a script
// that logs how it was called and runs the real Google Benchmark sample.
TEST_F(PipelineTest, BothSidesOfAnAbJobRunFromPathsOfOneLength) {
  if (std::string(KW_GBENCH_SAMPLE).empty()) GTEST_SKIP() << "Google Benchmark not installed";
  char pattern[] = "/tmp/kw-base-tree-named-by-its-commit-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path base = pattern;
  const fs::path calls = base / "calls.log";
  for (const fs::path& tree : {checkout_, base}) {
    std::ofstream(tree / "bench") << "#!/bin/sh\necho \"$0\" >> " << calls.string() << "\nexec "
                                  << KW_GBENCH_SAMPLE << " \"$@\"\n";
    fs::permissions(tree / "bench", fs::perms::owner_all);
  }
  json config = valid_config();
  config["benches"] = json::array({{{"name", "gb"}, {"path", "bench"}, {"format", "gbench"}}});
  config["full_bench"] = {{"replicates", 2}, {"max_replicates", 2}, {"confirm_replicates", 2}};
  PipelineOptions options = ab_options(base);
  options.only_stages = {common::StageName::full_bench};
  options.gpu_available = false;  // a CPU bench: the host's CPU is the device
  const json report = run_pipeline(parse_repo_config(config), options);
  std::ifstream in(calls);
  std::set<std::string> sides;
  std::set<std::size_t> lengths;
  std::set<fs::path> links;
  for (std::string line; std::getline(in, line);) {
    lengths.insert(line.size());
    sides.insert(fs::path(line).parent_path().filename().string());
    links.insert(fs::path(line).parent_path().parent_path());
  }
  fs::remove_all(base);
  ASSERT_FALSE(report["cases"].empty()) << report.dump();
  EXPECT_TRUE(report["cases"][0].contains("base_measurements")) << report["cases"][0].dump();
  EXPECT_EQ(sides, (std::set<std::string>{"base", "head"}));
  EXPECT_EQ(lengths.size(), 1u) << "argv[0] of " << lengths.size() << " lengths";
  // One folder of links for the job, gone with it.
  ASSERT_EQ(links.size(), 1u);
  EXPECT_FALSE(fs::exists(*links.begin())) << *links.begin();
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

// A kernelwatch.json of one python bench in `format` (perf_report,
// do_bench, tritonbench) on kwbench.py's CPU stand-in, two replicates a side.
json python_form_config(const std::string& format, const std::string& path) {
  return {
      {"project", "demo"},
      {"build", {{"commands", {"true"}}}},
      {"benches",
       {{{"name", "saxpy"}, {"path", path}, {"format", format}, {"args", {"--backend", "cpu-stand-in"}}}}},
      {"full_bench",
       {{"replicates", 2}, {"max_replicates", 2}, {"resolve_replicates", 2}, {"replicate_seconds", 0.02}}}};
}

// The fastest sample of a case's candidate on one side (`measurements` or
// `base_measurements`): a busy 2-core VM's host clock runs at two speeds.
double fastest_sample(const json& c, const char* side = "measurements") {
  const std::vector<double> samples = c[side][0]["samples_ns"].get<std::vector<double>>();
  return *std::min_element(samples.begin(), samples.end());
}

// A repository's own triton.testing.perf_report script, as it is
// ("format": "perf_report"), through the Triton TEST DOUBLE and kwbench's
// CPU stand-in backend (a TEST DOUBLE for CUDA): each x value a case, the
// Triton provider its candidate; a pull request that gives the candidate
// ten times the work is measured slower against the base in its job, and a
// no-op is not. The host clock of a busy 2-core VM runs at two speeds
// about 2x apart: each side's fastest sample is compared.
TEST_F(PipelineTest, APerfReportScriptRunsAsItIsAndItsCandidateIsMeasuredAgainstTheBase) {
  using common::StageName;
  const std::string script = std::string(KW_SOURCE_DIR) + "/kernels/python/tests/perf_report_bench.py";
  const std::string double_dir = std::string(KW_SOURCE_DIR) + "/kernels/python/tests/triton_test_double";
  ::setenv("PYTHONPATH", double_dir.c_str(), 1);
  std::ifstream in(script);
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(source.empty()) << script;
  json config = python_form_config("perf_report", "bench.py");
  config["benches"][0]["candidate"] = "triton";
  // The script and the module of its kernels, in the checkout.
  const fs::path kernels = std::string(KW_SOURCE_DIR) + "/kernels/python/tests/saxpy_kernels.py";
  std::ofstream(checkout_ / "bench.py") << source;
  fs::copy_file(kernels, checkout_ / "saxpy_kernels.py", fs::copy_options::overwrite_existing);
  json report = run(json::object(), true, config, {StageName::load, StageName::correctness});
  ::unsetenv("PYTHONPATH");
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "passed", "skipped", "passed", "skipped", "skipped"}))
      << report["stages"].dump(1);
  ASSERT_EQ(report["cases"].size(), 2u) << report["cases"].dump();
  EXPECT_EQ(report["cases"][0]["name"], "saxpy-performance/N=1000");
  EXPECT_TRUE(report["cases"][0]["correctness"]["passed"].get<bool>());

  // A/B: the head's candidate ten times the work, then a no-op.
  for (const double slowdown : {10.0, 1.0}) {
    char pattern[] = "/tmp/kw-perf-report-base-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    const fs::path base = pattern;
    std::ofstream(base / "bench.py") << source;
    fs::copy_file(kernels, base / "saxpy_kernels.py");
    std::ofstream(checkout_ / "bench.py")
        << "import os\nos.environ[\"KWBENCH_STANDIN_SLOWDOWN\"] = \"" << slowdown << "\"\n"
        << source;
    ::setenv("PYTHONPATH", double_dir.c_str(), 1);
    config["full_bench"]["confirm_replicates"] = 2;
    json ab = run_ab(config, base);
    ::unsetenv("PYTHONPATH");
    fs::remove_all(base);
    ASSERT_EQ(ab["cases"].size(), 2u) << ab.dump();
    for (const json& c : ab["cases"]) {
      ASSERT_TRUE(c.contains("base_measurements")) << c.dump();
      const double ratio = fastest_sample(c) / fastest_sample(c, "base_measurements");
      if (slowdown > 1) {
        EXPECT_GT(ratio, 3.0) << c["name"];
      } else {
        EXPECT_LT(ratio, 1.6) << c["name"];
        EXPECT_GT(ratio, 0.6) << c["name"];
      }
    }
  }
}

// A plain script that times its kernels with do_bench in loops over shapes
// and providers ("format": "do_bench"), with the same TEST DOUBLES: a case
// per shape named by its function, the providers its implementations, each shape timed on its own
// inputs (the loop's lambdas are kept with the values they had).
TEST_F(PipelineTest, ADoBenchScriptRunsAsItIsWithACasePerShape) {
  using common::StageName;
  ::setenv("PYTHONPATH", (std::string(KW_SOURCE_DIR) + "/kernels/python/tests/triton_test_double").c_str(),
           1);
  json config =
      python_form_config("do_bench", std::string(KW_SOURCE_DIR) + "/kernels/python/tests/do_bench_bench.py");
  json report = run(json::object(), true, config, {StageName::correctness, StageName::full_bench});
  ::unsetenv("PYTHONPATH");
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "skipped", "skipped", "passed", "skipped", "passed"}))
      << report["stages"].dump(1);
  ASSERT_EQ(report["cases"].size(), 2u) << report["cases"].dump();
  EXPECT_EQ(report["cases"][0]["name"], "do_bench_bench/main/n=1000");
  EXPECT_EQ(report["cases"][1]["name"], "do_bench_bench/main/n=4000");
  EXPECT_EQ(report["cases"][0]["measurements"][1]["impl"], "baseline:listcomp");
  EXPECT_GT(fastest_sample(report["cases"][1]), 2 * fastest_sample(report["cases"][0])) << "4x the work";
}

// An operator in TritonBench's layout ("format": "tritonbench"), through
// the TEST DOUBLE of TritonBench's utils beside it and kwbench's CPU
// stand-in: a case per input named by its x value, the registered baseline
// its first baseline.
TEST_F(PipelineTest, ATritonBenchOperatorRunsAsItIsWithACasePerInput) {
  using common::StageName;
  json config = python_form_config("tritonbench", std::string(KW_SOURCE_DIR) +
                                                      "/kernels/python/tests/tritonbench_layout/tritonbench/"
                                                      "operators/saxpy/operator.py");
  json report = run(json::object(), true, config, {StageName::correctness, StageName::full_bench});
  EXPECT_EQ(statuses(report),
            (std::vector<std::string>{"passed", "skipped", "skipped", "passed", "skipped", "passed"}))
      << report["stages"].dump(1);
  ASSERT_EQ(report["cases"].size(), 2u) << report["cases"].dump();
  EXPECT_EQ(report["cases"][0]["name"], "saxpy/size=1000");
  EXPECT_EQ(report["cases"][0]["params"]["size"], 1000);
  EXPECT_EQ(report["cases"][0]["measurements"][1]["impl"], "baseline:listcomp_saxpy");
  EXPECT_GT(fastest_sample(report["cases"][1]), 2 * fastest_sample(report["cases"][0])) << "4x the work";
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

}  // namespace
}  // namespace kw::agent
