// Runs a program to completion and captures stdout+stderr (tests only).
#pragma once

#include <string>
#include <vector>

#include "kw/common/subprocess.hpp"

namespace kw::testing {

struct CommandResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string output;
};

inline CommandResult run_command(const std::vector<std::string>& argv) {
  common::ChildSpec spec;
  spec.argv = argv;
  spec.timeout_s = 600;
  spec.tail_bytes = std::size_t{4} * 1024 * 1024;
  common::ChildOutcome outcome = common::run_child(spec);
  return {outcome.exit_code > 128 ? -(outcome.exit_code - 128) : outcome.exit_code, outcome.output_tail};
}

}  // namespace kw::testing
