// The checks over what a bench launched and loaded: launch geometry, kernel
// images against the GPU, the sanitizer's first report, ncu summaries.
#include "agent_test_support.hpp"

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
