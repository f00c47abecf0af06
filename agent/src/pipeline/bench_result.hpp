// One bench's result in one stage, whichever way its format ran it: the
// pipeline merges these into the stage and the report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct BenchResult {
  std::string status = "passed";
  std::string message;
  std::string log_tail;
  nlohmann::json details = nlohmann::json::object();
  nlohmann::json device;
  // The cases' parts (full_bench: with measurements, base_measurements,
  // first_pass_replicates).
  nlohmann::json cases = nlohmann::json::array();
  double seconds = 0;
};

}  // namespace kw::agent
