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
  std::string format;  // nvbench, gbench or python
  std::string path;    // relative to the repository, as it is after the build
  std::string how;     // how it was found, for the summary
};

struct Inspection {
  std::string project;
  std::vector<std::string> build_commands;
  std::vector<FoundBench> benches;
  std::vector<std::string> notes;  // what was found, and guesses said as guesses
  std::vector<std::string> todos;  // what the user must still write
  // Python projects: the bench script to write (path, text).
  std::string script_path, script_text;
};

// Looks at `repo` (and, for a CMake project, configures it into
// `build_dir`, a path relative to `repo`, when `configure` is set).
Inspection inspect_repository(const std::filesystem::path& repo, const std::string& build_dir,
                              bool configure);

nlohmann::json repo_config_of(const Inspection& inspection);

}  // namespace kw::agent
