// Nsight Compute's raw CSV (`ncu --csv --page raw`) made into what a person
// reads when a case got slower: per kernel, its launches, median time, SM
// and memory throughput, achieved occupancy and top warp-stall reasons, and
// base against head side by side.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kw::agent {

// The metrics kw profile asks ncu for (--metrics).
inline constexpr const char* kProfileMetrics =
    "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,"
    "sm__warps_active.avg.pct_of_peak_sustained_active,"
    "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio";

// The CSV lines of ncu's output, without the profiled program's own lines
// and ncu's "==PROF==" ones.
std::string ncu_csv_of(const std::string& output);

// {kernel name: {"launches", "time_us" (median), "sm_pct", "memory_pct",
// "occupancy_pct", "stalls": [{"reason", "cycles_per_issue"}] (the top 3)}}.
// Throws std::runtime_error naming what is missing.
nlohmann::json summarize_ncu_csv(const std::string& csv);

// profile.json's summary ({"case", "base"?, "head"}) as a Markdown table.
std::string profile_markdown(const nlohmann::json& summary);

// One line of the summary: the head's longest kernel, base -> head where
// the base launched it ("`k`: time 1812.1 -> 2265.1 us, SM 58.2 -> 46.6%,
// achieved occupancy 12.2 -> 12.2%, top stall wait 1.94").
std::string profile_headline(const nlohmann::json& summary);

}  // namespace kw::agent
