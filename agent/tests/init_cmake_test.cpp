// kw init over small CMake projects, written here: a Google Benchmark target
// (configured with the real cmake, and read from its files alone), an
// NVBench target in a CMake file, bench options off by default, targets made
// by the project's own functions, option defaults from variables, and a
// configure that downloads. What it writes must be a kernelwatch.json kw
// run reads.
#include <gtest/gtest.h>

#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "cli/init_command.hpp"
#include "init_test_support.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {
namespace {

namespace fs = std::filesystem;
using init_testing::only;
using init_testing::write;
using nlohmann::json;

InitOptions without_configure() {
  InitOptions options;
  options.configure = false;
  return options;
}

const char* kGbenchCmake = R"(cmake_minimum_required(VERSION 3.16)
project(micro CXX)
find_package(benchmark REQUIRED)
add_executable(sort_bench bench/sort.cpp)
target_link_libraries(sort_bench PRIVATE benchmark::benchmark)
add_executable(tool tool.cpp)
)";

TEST(InitCommand, ACMakeProjectsGoogleBenchmarkTargetAsBuilt) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-cmake");
  write(repo / "CMakeLists.txt", kGbenchCmake);
  write(repo / "bench/sort.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  write(repo / "tool.cpp", "int main() { return 0; }\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].format, "gbench");
  EXPECT_EQ(found.benches[0].path, "build/sort_bench") << "the artifact as CMake places it";
  EXPECT_NE(found.benches[0].how.find("CMake target sort_bench links Google Benchmark"), std::string::npos);
  const RepoConfig config = parse_repo_config(repo_config_of(found));
  EXPECT_EQ(config.build_commands.back(), "cmake --build build -j \"$(nproc)\" --target sort_bench");
  EXPECT_EQ(config.benches[0].format, BenchFormat::gbench);
  fs::remove_all(repo);
}

TEST(InitCommand, WithoutAConfigureTheCMakeFilesAreReadAndThePathIsAGuess) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-nvbench");
  write(repo / "CMakeLists.txt", "project(kernels CUDA CXX)\nadd_subdirectory(benches)\n");
  write(repo / "benches/CMakeLists.txt",
        "add_executable(copy_bench copy.cu)\ntarget_link_libraries(copy_bench PRIVATE nvbench::main)\n");
  const Inspection found = inspect_repository(repo, without_configure());
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_EQ(found.benches[0].format, "nvbench");
  EXPECT_EQ(found.benches[0].name, "copy_bench");
  EXPECT_EQ(found.benches[0].path, "build/benches/copy_bench");
  ASSERT_FALSE(found.todos.empty());
  EXPECT_NE(found.todos[0].find("guessed from benches/CMakeLists.txt"), std::string::npos) << found.todos[0];
  parse_repo_config(repo_config_of(found));
  fs::remove_all(repo);
}

// A project whose benchmarks are behind an option that is off by default
// (spdlog's SPDLOG_BUILD_BENCH), configured with that option on.
TEST(InitCommand, ABenchmarkOptionOffByDefaultIsTurnedOn) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-option");
  write(repo / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(lib CXX)\n"
        "option(LIB_BUILD_BENCH \"benchmarks\" OFF)\noption(LIB_BUILD_TESTS \"tests\" OFF)\n"
        "option(BENCHMARK_ENABLE_TESTING \"its tests\" OFF)\n"
        "if(LIB_BUILD_BENCH)\n  add_subdirectory(bench)\nendif()\n");
  write(repo / "bench/CMakeLists.txt",
        "find_package(benchmark REQUIRED)\nadd_executable(latency latency.cpp)\n"
        "target_link_libraries(latency PRIVATE benchmark::benchmark)\n");
  write(repo / "bench/latency.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].path, "build/bench/latency");
  ASSERT_EQ(found.build_commands.size(), 2u);
  EXPECT_EQ(found.build_commands[0], "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLIB_BUILD_BENCH=ON")
      << "the tests' options stay as they are";
  fs::remove_all(repo);
}

// A header-only library whose benchmarks sit behind a dependent option with
// a dotted name, off by default: kw init finds the option, configures with
// it on outside the repository (no build tree is left there), and the build
// command turns it on.
TEST(InitCommand, ADottedDependentOptionOffByDefaultIsTurnedOnAndNoBuildTreeIsLeft) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-dotted");
  write(repo / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.21)\nproject(lib CXX)\ninclude(CMakeDependentOption)\n"
        "add_library(lib INTERFACE)\n"
        "CMAKE_DEPENDENT_OPTION(lib.benchmark \"Build the benchmarks\" OFF \"PROJECT_IS_TOP_LEVEL\" OFF)\n"
        "option(LIB_FAST_MATH \"fast math\" OFF)\n"
        "if(lib.benchmark)\n  add_subdirectory(benchmarks)\nendif()\n");
  write(repo / "benchmarks/CMakeLists.txt",
        "find_package(benchmark REQUIRED)\nadd_executable(lib_bench bench.cpp)\n"
        "target_link_libraries(lib_bench PRIVATE lib benchmark::benchmark)\n");
  write(repo / "benchmarks/bench.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].path, "build/benchmarks/lib_bench");
  ASSERT_EQ(found.build_commands.size(), 2u);
  EXPECT_EQ(found.build_commands[0], "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -Dlib.benchmark=ON");
  EXPECT_FALSE(fs::exists(repo / "build")) << "kw init configured inside the repository";

  // Configured by hand with the option on, and another option of the
  // project changed: the tree is re-read and both go into the build command.
  auto configured = kw::testing::run_command({"cmake", "-S", repo.string(), "-B", (repo / "build").string(),
                                              "-Dlib.benchmark=ON", "-DLIB_FAST_MATH=ON"});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  const Inspection reread = inspect_repository(repo, {});
  ASSERT_EQ(reread.benches.size(), 1u) << json(reread.notes).dump();
  EXPECT_TRUE(reread.read_configured_tree);
  EXPECT_EQ(reread.build_commands[0],
            "cmake -S . -B build -G \"Unix Makefiles\" -DCMAKE_BUILD_TYPE=Release "
            "-Dlib.benchmark=ON -DLIB_FAST_MATH=ON")
      << "the tree's generator too";
  EXPECT_NE(json(reread.notes).dump().find("LIB_FAST_MATH as your build tree has them"), std::string::npos)
      << json(reread.notes).dump();
  EXPECT_TRUE(parse_repo_config(repo_config_of(reread)).benches.size() == 1);
  fs::remove_all(repo);
}

// A kit that keeps its CMake project one folder down and builds it with its
// own script (as ../shared/nvbench-kit does): the tree that script configured
// is re-read, each source once however many targets build it, and the
// script is the build command.
TEST(InitCommand, AConfiguredBuildTreeIsReReadAndTheTeamsBuildScriptKept) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-kit");
  write(repo / "build.sh", "cmake -S project -B build -DKIT_DEPS=here && cmake --build build\n");
  write(repo / "project/CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(kit CXX)\n"
        "if(NOT KIT_DEPS STREQUAL \"here\")\n  message(FATAL_ERROR \"run build.sh\")\nendif()\n"
        "find_package(benchmark REQUIRED)\n"
        "foreach(std 17 20)\n  add_executable(bench.example.cpp${std}.copy copy.cpp)\n"
        "  target_link_libraries(bench.example.cpp${std}.copy PRIVATE benchmark::benchmark)\nendforeach()\n"
        "add_executable(bench.example.cpp17.scan scan.cpp)\n"
        "target_link_libraries(bench.example.cpp17.scan PRIVATE benchmark::benchmark)\n");
  write(repo / "project/copy.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  write(repo / "project/scan.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  auto configured = kw::testing::run_command(
      {"cmake", "-S", (repo / "project").string(), "-B", (repo / "build").string(), "-DKIT_DEPS=here"});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;

  const Inspection all = inspect_repository(repo, {});
  ASSERT_EQ(all.benches.size(), 2u) << json(all.notes).dump();
  EXPECT_EQ(all.benches[0].path, "build/bench.example.cpp17.copy");
  EXPECT_EQ(all.build_commands, std::vector<std::string>{"bash build.sh"});

  const Inspection scan = inspect_repository(repo, only({"scan"}));
  ASSERT_EQ(scan.benches.size(), 1u);
  EXPECT_EQ(scan.benches[0].path, "build/bench.example.cpp17.scan");
  fs::remove_all(repo);
}

// A project whose configure downloads (RAPIDS.cmake, as NVBench's and
// rapids' projects do) on a host that cannot: kw init says CMake's error with
// its file and message, where the download is, and what to do.
TEST(InitCommand, AConfigureThatDownloadsSaysWhyAndWhatToDo) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-download");
  write(repo / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\n"
        "file(DOWNLOAD file:///nonexistent/RAPIDS.cmake ${CMAKE_BINARY_DIR}/RAPIDS.cmake)\n"
        "include(${CMAKE_BINARY_DIR}/RAPIDS.cmake)\ninclude(rapids-cmake)\nproject(lib CUDA)\n");
  const Inspection found = inspect_repository(repo, {});
  EXPECT_TRUE(found.benches.empty());
  ASSERT_EQ(found.todos.size(), 1u);
  const std::string& todo = found.todos[0];
  EXPECT_NE(todo.find("CMake Error at CMakeLists.txt:4 (include): include could not find requested file: "
                      "rapids-cmake."),
            std::string::npos)
      << todo;
  EXPECT_NE(todo.find("The configure downloads (CMakeLists.txt:2 calls file(DOWNLOAD ...))"),
            std::string::npos)
      << todo;
  EXPECT_NE(todo.find("pass it with --build-dir (none at build)"), std::string::npos) << todo;
  fs::remove_all(repo);
}

// Bench targets made inside the project's own CMake functions (rapids'
// ConfigureNVBench(NAME sources...), and one through
// cmake_parse_arguments), found from the CMake files alone.
TEST(InitCommand, BenchTargetsMadeByTheProjectsOwnFunctionsAreFound) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-functions");
  write(repo / "CMakeLists.txt",
        "project(lib CUDA CXX)\ninclude(cmake/Benches.cmake)\nadd_subdirectory(benchmarks)\n");
  write(repo / "cmake/Benches.cmake",
        "function(ConfigureNVBench CMAKE_BENCH_NAME)\n"
        "  add_executable(${CMAKE_BENCH_NAME} ${ARGN})\n"
        "  set_target_properties(${CMAKE_BENCH_NAME} PROPERTIES\n"
        "    RUNTIME_OUTPUT_DIRECTORY \"${CMAKE_BINARY_DIR}/benchmarks/nvbench\")\n"
        "  target_link_libraries(${CMAKE_BENCH_NAME} PRIVATE lib_common nvbench::nvbench)\n"
        "endfunction()\n"
        "function(lib_add_bench)\n"
        "  cmake_parse_arguments(BENCH \"\" \"NAME;FOLDER\" \"SOURCES\" ${ARGN})\n"
        "  add_executable(bench_${BENCH_NAME} ${BENCH_SOURCES})\n"
        "  target_link_libraries(bench_${BENCH_NAME} PRIVATE benchmark::benchmark)\n"
        "endfunction()\n"
        "function(lib_add_tool NAME)\n  add_executable(${NAME} ${NAME}.cpp)\nendfunction()\n");
  write(repo / "benchmarks/CMakeLists.txt",
        "ConfigureNVBench(COPY_NVBENCH copying/copy.cu copying/copy_if.cu)\n"
        "lib_add_bench(NAME scan SOURCES scan.cpp)\n"
        "ConfigureNVBench(${LIB_PREFIX}_SORT sort.cu)\n"
        "lib_add_tool(inspect)\n");
  const Inspection found = inspect_repository(repo, without_configure());
  ASSERT_EQ(found.benches.size(), 2u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].name, "COPY_NVBENCH");
  EXPECT_EQ(found.benches[0].format, "nvbench");
  EXPECT_EQ(found.benches[0].path, "build/benchmarks/nvbench/COPY_NVBENCH") << "its RUNTIME_OUTPUT_DIRECTORY";
  EXPECT_NE(found.benches[0].how.find("made by ConfigureNVBench() of cmake/Benches.cmake"), std::string::npos)
      << found.benches[0].how;
  EXPECT_EQ(found.benches[1].name, "scan");
  EXPECT_EQ(found.benches[1].format, "gbench");
  EXPECT_EQ(found.benches[1].path, "build/benchmarks/bench_scan");
  EXPECT_NE(json(found.notes)
                .dump()
                .find("1 call(s) of ConfigureNVBench() (cmake/Benches.cmake) name their "
                      "target through a variable"),
            std::string::npos)
      << json(found.notes).dump();
  parse_repo_config(repo_config_of(found));
  fs::remove_all(repo);
}

// Option defaults written as variables, from a tree configured by hand with
// Ninja, as cuCollections' CMakeLists.txt writes them: those the files settle
// are judged (BUILD_TESTS=OFF against a default that is ON for the top
// project is kept, BUILD_BENCHMARKS=ON and LIB_FAST=ON, their defaults, are
// not), one they cannot is set as the tree has it, said in a note; the
// tree's generator and a parallel build.
TEST(InitCommand, OptionDefaultsFromVariablesAreJudgedAndTheTreesGeneratorKept) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-variables");
  write(repo / "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.21)\nproject(lib CXX)\n"
        "set(default_build_option_state OFF)\n"
        "if (\"${CMAKE_SOURCE_DIR}\" STREQUAL \"${CMAKE_CURRENT_LIST_DIR}\")\n"
        "  set(default_build_option_state ON)\nendif()\n"
        "option(BUILD_TESTS \"tests\" ${default_build_option_state})\n"
        "option(BUILD_BENCHMARKS \"benchmarks\" ${default_build_option_state})\n"
        "option(BUILD_EXAMPLES \"examples\" ${PROJECT_IS_TOP_LEVEL})\n"
        "set(LIB_DEFAULT_ON ON)\noption(LIB_EXTRA \"extra\" ${LIB_DEFAULT_ON})\n"
        "set(LIB_FAST ${LIB_EXTRA} CACHE BOOL \"fast paths\")\n"
        "option(LIB_FROM_PARENT \"set by a parent\" ${LIB_PARENT_WANTS_IT})\n"
        "find_package(benchmark REQUIRED)\nadd_executable(latency latency.cpp)\n"
        "target_link_libraries(latency PRIVATE benchmark::benchmark)\n");
  write(repo / "latency.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  auto configured =
      kw::testing::run_command({"cmake", "-S", repo.string(), "-B", (repo / "build").string(), "-G", "Ninja",
                                "-DBUILD_TESTS=OFF", "-DBUILD_EXAMPLES=OFF", "-DLIB_FROM_PARENT=ON"});
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  ASSERT_EQ(found.build_commands.size(), 2u);
  EXPECT_EQ(found.build_commands[0],
            "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTS=OFF -DBUILD_EXAMPLES=OFF "
            "-DLIB_FROM_PARENT=ON");
  EXPECT_EQ(found.build_commands[1], "cmake --build build -j \"$(nproc)\" --target latency");
  EXPECT_NE(json(found.notes)
                .dump()
                .find("LIB_FROM_PARENT (${LIB_PARENT_WANTS_IT}) set as your build tree has "
                      "them"),
            std::string::npos)
      << json(found.notes).dump();
  fs::remove_all(repo);
}

TEST(InitCommand, NothingFoundSaysWhatToAdd) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-empty");
  write(repo / "README.md", "nothing to measure\n");
  const Inspection found = inspect_repository(repo, {});
  EXPECT_TRUE(found.benches.empty());
  ASSERT_EQ(found.todos.size(), 1u);
  EXPECT_NE(found.todos[0].find("no bench found"), std::string::npos);
  fs::remove_all(repo);
}

}  // namespace
}  // namespace kw::agent
