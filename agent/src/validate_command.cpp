#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "kw/common/run_report.hpp"

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

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
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
