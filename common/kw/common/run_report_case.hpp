// A run report's case read and checked (parse_run_report reads each case
// with it, on every core): its launches, correctness, measurements, GPU
// state and fingerprint, each consistent with the others.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"

namespace kw::common {

// Throws ValidationError naming the field at `path`.
Case read_case(const nlohmann::json& value, const std::string& path);

}  // namespace kw::common
