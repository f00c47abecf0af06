// What kw init's tests share: files written into a scratch repository,
// and options that pick what kw init looks at.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/init_command.hpp"

namespace kw::agent::init_testing {

inline void write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

inline InitOptions only(std::vector<std::string> globs) {
  InitOptions options;
  options.only = std::move(globs);
  return options;
}

}  // namespace kw::agent::init_testing
