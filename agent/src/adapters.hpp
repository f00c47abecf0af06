// Turns other harnesses' output into run-report cases with measurements:
// Google Benchmark JSON (each repetition's real/manual time is a sample) and
// NVBench JSON written with --jsonbin (per-sample cold GPU times, or CPU
// times of cpu_only benchmarks, and SM clocks, from its binary sidecars; the
// summary's mean as one sample when a sidecar is missing, said in "notes").
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace kw::agent {

// Both return {"cases": [...]} ready to merge into a report, and throw
// std::runtime_error naming what is wrong with the input. adapt_nvbench adds
// "device" (from NVBench's devices section) and "notes" (what was left out or
// approximated, for the stage's message).
nlohmann::json adapt_gbench(const nlohmann::json& output, const std::string& prefix);
nlohmann::json adapt_nvbench(const nlohmann::json& output, const std::filesystem::path& json_file,
                             const std::string& prefix);

}  // namespace kw::agent
