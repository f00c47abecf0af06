// The stages of a run, as data. Their order is the pipeline's and the
// report's; each row says what the pipeline, the report's parser, the shard
// merge, `kw run --stages`, kernelwatch.json's timeouts_s, the C++ and
// Python harnesses' command lines and the docs take from it
// (tests/stage_table.py holds the Python harness and the docs to it).
// Adding a stage is a row here, its StageName, and what each bench adapter
// does in it.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

namespace kw::common {

// `config` (kernelwatch.json itself) appears in a report only when it failed.
enum class StageName { config, build, load, launch_geometry, correctness, quick_bench, full_bench };

struct StageRow {
  StageName name;
  std::string_view text;
  // Before full_bench: what `kw run --stages preflight` selects, and what a
  // kwbench bench runs in one process.
  bool preflight;
  // Whether a bench of a CPU harness (Google Benchmark) runs it on a host
  // without a GPU; every bench's build runs there.
  bool runs_without_gpu;
  // Its limit is kernelwatch.json's timeouts_s.<text> (the build's is
  // build.timeout_s; config has none).
  bool timeout_key;
  // A failure skips every stage after it ("not run: the <text> stage failed").
  bool failure_skips_later;
};

inline constexpr std::array<StageRow, 7> kStageTable = {{
    // name, text, preflight, runs_without_gpu, timeout_key, failure_skips_later
    {StageName::config, "config", false, true, false, true},
    {StageName::build, "build", false, true, false, true},
    {StageName::load, "load", true, true, true, true},
    {StageName::launch_geometry, "launch_geometry", true, false, true, true},
    {StageName::correctness, "correctness", true, true, true, true},
    {StageName::quick_bench, "quick_bench", true, false, true, true},
    {StageName::full_bench, "full_bench", false, true, true, false},
}};

static_assert(
    [] {
      for (std::size_t i = 0; i < kStageTable.size(); ++i) {
        if (kStageTable[i].name != static_cast<StageName>(i)) return false;
      }
      return true;
    }(),
    "kStageTable's rows are in StageName's order");

constexpr const StageRow& stage_row(StageName name) {
  return kStageTable[static_cast<std::size_t>(name)];
}

// The stages every run reports, config aside, in order.
inline constexpr std::array<StageName, kStageTable.size() - 1> kAllStages = [] {
  std::array<StageName, kStageTable.size() - 1> stages{};
  for (std::size_t i = 1; i < kStageTable.size(); ++i) stages[i - 1] = kStageTable[i].name;
  return stages;
}();

// The preflight stages, in order.
inline std::vector<StageName> preflight_stages() {
  std::vector<StageName> stages;
  for (const StageRow& row : kStageTable) {
    if (row.preflight) stages.push_back(row.name);
  }
  return stages;
}

constexpr std::string_view to_string(StageName name) {
  return stage_row(name).text;
}

constexpr std::optional<StageName> stage_name_from(std::string_view text) {
  for (const StageRow& row : kStageTable) {
    if (row.text == text) return row.name;
  }
  return std::nullopt;
}

}  // namespace kw::common
