// Turns other harnesses' output into run-report cases with measurements:
// Google Benchmark JSON (each repetition's real/manual time is a sample) and
// NVBench JSON (per-sample cold GPU times from its binary sidecar, else the
// cold GPU mean as one sample).
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace kw::agent {

// Both return {"cases": [...]} ready to merge into a report, and throw
// std::runtime_error naming what is wrong with the input.
nlohmann::json adapt_gbench(const nlohmann::json& output, const std::string& prefix);
nlohmann::json adapt_nvbench(const nlohmann::json& output, const std::filesystem::path& json_file,
                             const std::string& prefix);

}  // namespace kw::agent
