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
  // The default as written when it is a variable kw init could not evaluate
  // ("${LIB_DEFAULT}"); empty when default_on is known.
  std::string unjudged_default;
};

// The options of the project's CMake files (its top, cmake/ and every
// CMakeLists.txt below), each once, in the order found; set(NAME VALUE
// CACHE BOOL ...) counts as one. A default written as a variable is
// evaluated where the files say what it is: PROJECT_IS_TOP_LEVEL and
// <name>_IS_TOP_LEVEL are on (kernelwatch builds the project as its top),
// another option's default, or the value every plain set() of it gives.
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

// Why a configure failed, for the user: CMake's first error with its file,
// line and message and, where the project's CMake files download (file
// DOWNLOAD, FetchContent, CPM, rapids-cmake, ExternalProject), where, and
// what to do instead.
std::string configure_failure(const std::string& output, const std::filesystem::path& source_dir,
                              const std::filesystem::path& repo, const std::string& build_dir);

// Without a configure: add_executable(NAME ...) and target_link_libraries(NAME
// ... nvbench|benchmark ...) in the CMake files, and the calls of the
// project's own functions and macros that make such a target from an
// argument (ConfigureNVBench(NAME sources...), add_bench(NAME x SOURCES ...)
// through cmake_parse_arguments); the path is a guess.
void cmake_files(const std::filesystem::path& repo, const InitOptions& options, Inspection& out);

// How the team builds: its own build script at the top when it has one
// (it knows the options and dependency paths), else CMake's two commands,
// with the benchmark options on, a parallel build and, from a build tree the
// team configured, its generator and every option of the project its cache
// holds at another value than the project's default (or whose default kw
// init could not evaluate, said in a note).
void cmake_build_commands(const std::filesystem::path& repo, const std::filesystem::path& source_dir,
                          const std::vector<CmakeOption>& declared,
                          const std::vector<std::string>& bench_options, const InitOptions& options,
                          Inspection& out);

}  // namespace kw::agent
