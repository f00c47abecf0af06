#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/shards.hpp"
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

// kernelwatch.json as the agent will read it, before a push: every problem,
// one a line.
int validate_config(const std::string& path) {
  try {
    const RepoConfig config = load_repo_config(path);
    std::string benches;
    for (const BenchConfig& bench : config.benches)
      benches +=
          (benches.empty() ? "" : ", ") + bench.name + " (" + std::string(to_string(bench.format)) + ")";
    std::cout << path << ": valid: project " << config.project << ", " << config.benches.size()
              << " bench(es): " << benches << "\n";
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
