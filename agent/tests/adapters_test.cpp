// The Google Benchmark and NVBench adapters over real output, and a report
// split into parts.
#include "agent_test_support.hpp"

namespace kw::agent {
namespace {

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

// An NVBench pinned before 2026-02 (no --no-batch) and 2023-11 (no
// --stopping-criterion) gets only what it accepts; stdrel's parameters,
// which its one criterion reads, stay.
TEST(Adapters, NvbenchPassArgumentsUseOnlyWhatTheBenchAccepts) {
  BenchConfig bench;
  FullBenchConfig fb;
  fb.noise_target = 0.005;
  fb.replicate_seconds = 0.25;
  fb.min_samples = 10;
  NvbenchSupport of_2023;
  of_2023.no_batch = false;
  of_2023.stopping_criterion = false;
  EXPECT_EQ(nvbench_pass_args(bench, fb, {"first"}, of_2023),
            (std::vector<std::string>{"--max-noise", "0.500000", "--min-time", "0.250000", "--min-samples",
                                      "10", "--timeout", "2.000000", "-b", "first"}));
  const std::vector<std::string> notes = nvbench_support_notes(of_2023);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("no --no-batch"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("no --stopping-criterion"), std::string::npos) << notes[1];
  EXPECT_TRUE(nvbench_support_notes({}).empty()) << "today's NVBench lacks nothing";
}

TEST(Adapters, NvbenchRefusedArgumentIsReadFromItsError) {
  // What NVBench 2023-11 (7521229) printed for --no-batch on an H100
  // (docs/results/nvbench-versions-h100.txt's run).
  EXPECT_EQ(nvbench_refused_argument(
                "NVBench encountered an error:\n\n/tmp/kw-nvbench-versions/2023/nvbench/nvbench/"
                "option_parser.cu:516: Unrecognized command-line argument: `--no-batch`.\n"),
            "--no-batch");
  EXPECT_EQ(nvbench_refused_argument("cudaErrorNoDevice: no CUDA-capable device is detected"), "");
  EXPECT_EQ(nvbench_refused_argument("Unrecognized command-line argument: `--no-b"), "") << "cut off";
}

// A test double for an NVBench built before 2022-04 (a real one needs a GPU
// to start): it refuses, by name and before --list, each option it lacks,
// as NVBench's option parser does. The adapter drops each and asks again,
// once per build of the executable.
TEST(Adapters, NvbenchAsksTheBenchWhatItAccepts) {
  const fs::path dir = kw::testing::make_temp_dir("kw-nvbench-old");
  const fs::path calls = dir / "calls.txt";
  {
    std::ofstream script(dir / "old_nvbench");
    script
        << "#!/bin/sh\necho \"$*\" >> " << calls.string() << "\n"
        << "for a in \"$@\"; do\n"
        << "  case \"$a\" in\n"
        << "    --no-batch|--stopping-criterion|--profile|--own-option)\n"
        << "      echo \"what():  option_parser.cu:516: Unrecognized command-line argument: \\`$a\\`.\" >&2; "
           "exit 1 ;;\n"
        << "    --list) printf '# Devices\\n\\n# Benchmarks\\n\\n## [0] `copy` (1 configurations)\\n'; exit "
           "0 ;;\n"
        << "  esac\n"
        << "done\n";
  }
  fs::permissions(dir / "old_nvbench", fs::perms::owner_all);
  BenchConfig bench;
  bench.name = "old";
  bench.path = "old_nvbench";
  bench.format = BenchFormat::nvbench;
  RepoConfig config;
  std::atomic<bool> stop{false};
  const BenchContext context{bench, config, dir, stop};
  const BenchAdapter& adapter = adapter_for(BenchFormat::nvbench);

  const CaseListing listing = adapter.list_cases(context);
  ASSERT_TRUE(listing.ok) << listing.failure;
  EXPECT_EQ(listing.groups, std::vector<std::string>{"copy"});
  EXPECT_EQ(adapter.one_pass_args(context), std::vector<std::string>{"--run-once"});
  EXPECT_TRUE(adapter.list_cases(context).ok);
  std::ifstream in(calls);
  std::vector<std::string> runs;
  for (std::string line; std::getline(in, line);) runs.push_back(line);
  EXPECT_EQ(runs, (std::vector<std::string>{"--no-batch --stopping-criterion stdrel --profile --list",
                                            "--stopping-criterion stdrel --profile --list",
                                            "--profile --list", "--list"}))
      << "one run per refused option, then none: the answer is kept";

  // Today's NVBench takes every option but a second --stopping-criterion: a
  // bench that sets its own criterion is not asked about kernelwatch's.
  const fs::path own_calls = dir / "own_calls.txt";
  {
    std::ofstream script(dir / "new_nvbench");
    script << "#!/bin/sh\necho \"$*\" >> " << own_calls.string() << "\n"
           << "case \"$*\" in *--stopping-criterion*--stopping-criterion*) echo 'a second criterion' >&2; "
              "exit 1 ;; esac\n"
           << "printf '# Benchmarks\\n\\n## [0] `copy` (1 configurations)\\n'\n";
  }
  fs::permissions(dir / "new_nvbench", fs::perms::owner_all);
  bench.path = "new_nvbench";
  bench.args = {"--stopping-criterion", "sample-count", "--target-samples", "50"};
  const CaseListing own = adapter.list_cases(context);
  EXPECT_TRUE(own.ok) << own.failure;
  std::ifstream own_in(own_calls);
  std::string own_run;
  std::getline(own_in, own_run);
  EXPECT_EQ(own_run, "--no-batch --profile --stopping-criterion sample-count --target-samples 50 --list");

  // An option of the bench's own that it refuses is the user's to fix, named.
  bench.args = {"--own-option"};
  fs::copy_file(dir / "old_nvbench", dir / "old_nvbench_2");
  bench.path = "old_nvbench_2";
  const CaseListing refused = adapter.list_cases(context);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.failure.find("does not accept --own-option"), std::string::npos) << refused.failure;
  fs::remove_all(dir);
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
