// kernelwatch.json: how kernelwatch builds and benchmarks a tracked repository
// (documented in docs/repo-config.md).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"

namespace kw::agent {

enum class BenchFormat { kwbench, gbench, nvbench };

struct LibraryCheck {
  std::string path;
  std::vector<std::string> symbols;
};

struct BenchConfig {
  std::string name;
  std::string path;  // relative to the repository root
  BenchFormat format = BenchFormat::kwbench;
  std::vector<std::string> args;
  std::string cases = "*";  // kwbench --case glob
  std::vector<LibraryCheck> libraries;
};

struct RepoConfig {
  std::string project;
  std::vector<std::string> build_commands;
  double build_timeout_s = 1800;
  std::map<std::string, std::string> build_env;
  std::vector<BenchConfig> benches;
  std::map<common::StageName, double> stage_timeouts_s;
  std::optional<double> min_threshold;
  std::map<std::string, double> case_thresholds;

  double timeout_for(common::StageName stage) const;
};

// Throws common::ValidationError naming the field ("benches[1].format: ...").
RepoConfig parse_repo_config(const nlohmann::json& document);
RepoConfig load_repo_config(const std::filesystem::path& file);

std::string_view to_string(BenchFormat format);

}  // namespace kw::agent
