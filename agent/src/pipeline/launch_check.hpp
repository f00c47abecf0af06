// launch_geometry for benches of other harnesses: their processes run once
// with libkw_inject.so loaded (CUDA_INJECTION64_PATH), and the launches it
// recorded are held against kernelwatch.json's `launches` expectations.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "project/repo_config.hpp"

namespace kw::agent {

// Every launch in the records under `dir` (kernels/inject's format), and
// what makes the observation incomplete: a process that wrote an error,
// that dropped records, or that ended without its closing line.
// A launch after a {"mark": LABEL} line of its process carries "mark": LABEL.
struct InjectedLaunches {
  std::vector<nlohmann::json> launches;
  std::vector<nlohmann::json> modules;  // {"format", "image", "kernels", "problem"?}
  std::set<std::string> mapped;         // files the processes mapped executable
  std::vector<std::string> refused;     // launches the driver refused, explained
  std::vector<std::string> problems;
  int processes = 0;
};
InjectedLaunches read_injected_launches(const std::filesystem::path& dir);

// A refused launch's record as a sentence with the numbers: the dynamic
// shared memory asked against the kernel's limit, the block against its
// thread limit (which its registers set).
std::string explain_refused_launch(const nlohmann::json& refused);

struct LaunchCheck {
  bool passed = true;
  std::string message;
  nlohmann::json details;  // per expectation: matching launches and problems
};
// A case's declared launch ({"kernel_pattern", "block", "grid"?,
// "max_registers"?, "max_shared_bytes"?}) as an expectation that must launch.
LaunchExpectation expectation_of(const nlohmann::json& expected_launch);

LaunchCheck check_launches(const std::vector<LaunchExpectation>& expected,
                           const std::vector<nlohmann::json>& launches);

// libkw_inject.so: KW_INJECT_LIBRARY, else beside this kw binary, in ../lib,
// or in the build tree's kernels/inject.
std::optional<std::filesystem::path> find_inject_library();

// Said once at the start of `kw run` and `kw agent`: where libkw_inject.so
// is, or where it was looked for and what its absence costs.
std::string inject_library_line();

}  // namespace kw::agent
