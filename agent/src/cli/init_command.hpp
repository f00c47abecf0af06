// kw init: a repository's first kernelwatch.json. It looks for what the team
// already has (CMake targets linking NVBench or Google Benchmark, found from
// CMake's own file API after a configure, else from the CMake files; a
// PyTorch CUDA extension; Triton kernels), writes a kernelwatch.json that
// builds and runs them, and for a PyTorch or Triton project a bench script
// whose only gaps are marked TODO. It says what it found and what is left.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct FoundBench {
  std::string name;    // the bench's name in kernelwatch.json
  std::string format;  // nvbench, gbench, python, perf_report, do_bench or tritonbench
  std::string path;    // relative to the repository, as it is after the build
  std::string how;     // how it was found, for the summary
};

struct Inspection {
  std::string project;
  std::vector<std::string> build_commands;
  std::vector<FoundBench> benches;
  std::vector<std::string> notes;     // what was found, and guesses said as guesses
  std::vector<std::string> todos;     // what the user must still write
  bool read_configured_tree = false;  // the team's own build tree, not one kw init configured
  std::string configure_failure;      // why CMake could not configure the project here, and what to do
  // Python projects: the bench script to write (path, text).
  std::string script_path, script_text;
};

struct InitOptions {
  std::string build_dir = "build";  // relative to the repository
  bool configure = true;            // run CMake to read its targets (else read its files)
  // Globs over bench, target, function and kernel names: only what matches
  // one is written (a large suite's first tracked part). Empty: everything.
  std::vector<std::string> only;
};

// Looks at `repo`. A CMake project is read from CMake's file API: from the
// build tree at `build_dir` when the team configured one there already (its
// cache holds the options and dependency paths its build needs), else from
// a fresh configure with the project's benchmark options on.
Inspection inspect_repository(const std::filesystem::path& repo, const InitOptions& options);

nlohmann::json repo_config_of(const Inspection& inspection);

}  // namespace kw::agent
