// Fault injection for the regression detector's power tests on a GPU: the
// stand-in for "a correct change that makes these cases slower". Every commit
// of this repository leaves kInjectedSlowdown empty; the power series
// (tools/detection-series.sh) edits it in a throwaway head commit, so
// base and head differ exactly as two real commits would.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "kwbench/kwbench.hpp"

namespace {

// "GLOB=FRACTION;GLOB=FRACTION": cases matching GLOB run FRACTION slower.
inline constexpr std::string_view kInjectedSlowdown = "";

double injected_slowdown(const std::string& case_name) {
  std::string_view rest = kInjectedSlowdown;
  while (!rest.empty()) {
    std::string_view item = rest.substr(0, rest.find(';'));
    rest = item.size() < rest.size() ? rest.substr(item.size() + 1) : std::string_view{};
    std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) continue;
    if (kwbench::glob_match(std::string(item.substr(0, equals)), case_name))
      return std::strtod(std::string(item.substr(equals + 1)).c_str(), nullptr);
  }
  return 0;
}

}  // namespace
