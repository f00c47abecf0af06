#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "cli/commands.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/shards.hpp"
#include "pipeline/adapters.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace {

int validate_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot open: " << std::strerror(errno) << "\n";
    return kExitInvalid;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    common::RunReport report = common::parse_run_report_text(text.str());
    std::size_t samples = 0;
    for (const auto& c : report.cases) {
      for (const auto& m : c.measurements) samples += m.samples_ns.size();
    }
    std::cout << path << ": valid " << common::kRunSchema << " (" << report.stages.size() << " stages, "
              << report.cases.size() << " cases, " << samples << " samples)\n";
    return kExitOk;
  } catch (const common::ValidationError& error) {
    std::cerr << path << ": invalid: " << error.what() << "\n";
    return kExitInvalid;
  }
}

namespace fs = std::filesystem;

std::string text_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The repository's CMake and Make files, outside build trees and hidden folders.
std::vector<fs::path> build_files(const fs::path& repo) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(repo, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec)) {
      if (name.starts_with(".") || name.starts_with("build") || name == "node_modules")
        it.disable_recursion_pending();
      continue;
    }
    if (name == "CMakeLists.txt" || name.ends_with(".cmake") || name == "Makefile" || name == "GNUmakefile")
      files.push_back(it->path());
  }
  return files;
}

// Whether the repository's build files make a file called `name`: a CMake
// target of that name (or OUTPUT_NAME), or a Make rule.
bool built_by_build_files(const std::vector<fs::path>& files, const std::string& name) {
  const std::string literal = regex_literal(name);
  const std::regex cmake(R"((add_executable|add_library|add_custom_target)\s*\(\s*)" + literal + R"([\s)])" +
                         "|OUTPUT_NAME\\s+\"?" + literal + "\\b");
  const std::regex make("(^|\\n)" + literal + "\\s*:");
  for (const fs::path& file : files) {
    const std::string text = text_of(file);
    const bool is_cmake = file.filename() == "CMakeLists.txt" || file.extension() == ".cmake";
    if (std::regex_search(text, is_cmake ? cmake : make)) return true;
  }
  return false;
}

// Bench paths that nothing seems to write: the file is not in the checkout,
// no build command names it, and no CMake target or Make rule of the
// repository makes a file of its name. A warning, not a problem: a build
// script may still write it.
std::vector<std::string> bench_path_warnings(const RepoConfig& config, const fs::path& repo) {
  std::vector<std::string> warnings;
  std::optional<std::vector<fs::path>> files;
  for (std::size_t i = 0; i < config.benches.size(); ++i) {
    const BenchConfig& bench = config.benches[i];
    const fs::path path(bench.path);
    const std::string name = path.filename().string();
    if (fs::exists(repo / path)) continue;
    bool named = false;
    for (const std::string& command : config.build_commands)
      named = named || command.find(name) != std::string::npos;
    if (named) continue;
    const std::string where = "benches[" + std::to_string(i) + "].path (" + bench.path + ")";
    if (bench.format == BenchFormat::python) {
      warnings.push_back(where + ": no such file in the repository, and no build command names it");
      continue;
    }
    if (!files) files = build_files(repo);
    if (!built_by_build_files(*files, name))
      warnings.push_back(where + ": not built yet, no build command names " + name +
                         ", and no CMake target or Make rule of the repository makes it");
  }
  return warnings;
}

// kernelwatch.json as the agent will read it, before a push: every problem,
// one a line, then what looks wrong but may not be.
int validate_config(const std::string& path) {
  try {
    const RepoConfig config = load_repo_config(path);
    std::string benches;
    for (const BenchConfig& bench : config.benches)
      benches +=
          (benches.empty() ? "" : ", ") + bench.name + " (" + std::string(to_string(bench.format)) + ")";
    std::cout << path << ": valid: project " << config.project << ", " << config.benches.size()
              << " bench(es): " << benches << "\n";
    for (const std::string& warning : bench_path_warnings(config, fs::absolute(path).parent_path()))
      std::cout << "  warning: " << warning << "\n";
    return kExitOk;
  } catch (const ConfigError& error) {
    const auto& problems = error.problems();
    std::cerr << path << ": "
              << (problems.size() == 1 ? "1 problem" : std::to_string(problems.size()) + " problems") << "\n";
    for (const std::string& problem : problems) std::cerr << "  " << problem << "\n";
    return kExitInvalid;
  }
}

// The shards' reports of one job (kw run --shard K/N --out) as one run.
int merge_shards(const std::vector<std::string>& files, const std::string& out) {
  std::vector<nlohmann::json> reports;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << path << ": cannot open: " << std::strerror(errno) << "\n";
      return kExitInvalid;
    }
    try {
      reports.push_back(nlohmann::json::parse(in));
    } catch (const nlohmann::json::parse_error& error) {
      std::cerr << path << ": not JSON: " << error.what() << "\n";
      return kExitInvalid;
    }
  }
  try {
    const nlohmann::json run = common::merge_shard_reports(reports);
    std::ofstream written(out, std::ios::binary);
    written << run.dump() << "\n";
    if (!written.flush()) {
      std::cerr << out << ": cannot write: " << std::strerror(errno) << "\n";
      return kExitInvalid;
    }
    std::cout << out << ": " << run["cases"].size() << " cases from " << reports.size() << " shards\n";
    return kExitOk;
  } catch (const common::ValidationError& error) {
    std::cerr << "kw merge-shards: " << error.what() << "\n";
    return kExitInvalid;
  }
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
  auto* config_command = app.add_subcommand(
      "validate-config", "Check a kernelwatch.json as the agent reads it: every problem at once");
  auto config_file = std::make_shared<std::string>("kernelwatch.json");
  config_command->add_option("FILE", *config_file, "the file")->capture_default_str();
  config_command->callback([config_file, &exit_code] { exit_code = validate_config(*config_file); });

  auto* merge =
      app.add_subcommand("merge-shards", "Merge the shards' reports of one run (kw run --shard) into one");
  auto shard_files = std::make_shared<std::vector<std::string>>();
  auto merged = std::make_shared<std::string>();
  merge->add_option("FILE", *shard_files, "every shard's report")->required();
  merge->add_option("--out", *merged, "the run's report")->required();
  merge->callback([shard_files, merged, &exit_code] { exit_code = merge_shards(*shard_files, *merged); });

  auto* command = app.add_subcommand("validate", "Check run reports against kernelwatch.run/1");
  auto files = std::make_shared<std::vector<std::string>>();
  command->add_option("FILE", *files, "run report JSON files")->required();
  command->callback([files, &exit_code] {
    exit_code = kExitOk;
    for (const std::string& file : *files) {
      if (validate_file(file) != kExitOk) exit_code = kExitInvalid;
    }
  });
}

}  // namespace kw::agent
