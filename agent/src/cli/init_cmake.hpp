// kw init on a CMake project: its options, its bench targets (from CMake's
// file API after a configure, else from its CMake files) and how the team
// builds it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/init_command.hpp"

namespace kw::agent {

// An option the project declares: option(NAME "help" [ON|OFF]) or
// cmake_dependent_option(NAME "help" DEFAULT "DEPENDS" FORCE), in any case,
// a name of any spelling (lib.benchmark, LIB_BUILD_BENCH).
struct CmakeOption {
  std::string name;
  bool default_on = false;
};

// The options of the project's CMake files (its top, cmake/ and every
// CMakeLists.txt below), each once, in the order found.
std::vector<CmakeOption> cmake_options(const std::filesystem::path& source_dir);

// The project's options that build its benchmarks (SPDLOG_BUILD_BENCH,
// BUILD_BENCHMARKS, lib.benchmark): a word of the name is BENCH[MARK][S],
// and none is about tests, installs or docs, which a bench build does not
// need. Those already on by default need no flag.
std::vector<std::string> benchmark_options(const std::vector<CmakeOption>& options);

// A key's value in the build tree's CMakeCache.txt; empty: none.
std::string cache_value(const std::filesystem::path& build, const std::string& key);

// CMake's file API: each executable target with its artifact's path and what
// it links. A build tree configured already is re-read as it is (`cmake
// BUILD`); otherwise the project is configured with its benchmark options on
// in a scratch tree outside the repository, removed once read: kw init
// leaves no build tree behind that was not there.
bool cmake_targets(const std::filesystem::path& repo, const std::filesystem::path& source_dir,
                   const std::vector<std::string>& bench_options, const InitOptions& options,
                   Inspection& out);

// Without a configure: add_executable(NAME ...) and target_link_libraries(NAME
// ... nvbench|benchmark ...) in the CMake files; the path is a guess.
void cmake_files(const std::filesystem::path& repo, const InitOptions& options, Inspection& out);

// How the team builds: its own build script at the top when it has one
// (it knows the options and dependency paths), else CMake's two commands,
// with the benchmark options on and, from a build tree the team configured,
// every option of the project its cache holds at another value than the
// project's default.
void cmake_build_commands(const std::filesystem::path& repo, const std::filesystem::path& source_dir,
                          const std::vector<CmakeOption>& declared,
                          const std::vector<std::string>& bench_options, const InitOptions& options,
                          Inspection& out);

}  // namespace kw::agent
