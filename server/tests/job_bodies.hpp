// The bodies of a job's request and of an agent's claim, as kw sends them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../tests/support/report_factory.hpp"

namespace kw::server::testing {

inline nlohmann::json job_request(std::uint64_t n, const std::string& gpu_class = "") {
  nlohmann::json body{{"project", "demo"}, {"commit", kw::testing::make_commit(n)}, {"branch", "main"}};
  if (!gpu_class.empty()) body["gpu_class"] = gpu_class;
  return body;
}

inline nlohmann::json claim_body(const std::string& agent,
                                 const std::vector<std::string>& gpus = {"NVIDIA H100 80GB HBM3"}) {
  return {{"agent", agent}, {"host", agent + ".local"}, {"version", "0.1.0"}, {"gpus", gpus}};
}

}  // namespace kw::server::testing
