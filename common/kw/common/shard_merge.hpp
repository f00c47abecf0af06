// Merging shard reports as kw-server does: taking their cases rather than
// copying them. Apart from shards.hpp, which run_report.hpp includes.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/run_report.hpp"
#include "kw/common/shards.hpp"

namespace kw::common {

// As merge_shard_reports, taking the reports' cases rather than copying them
// (what it leaves of `reports` is for nothing but freeing), with the merged
// run parsed: a merge holds one copy of the run, as parsing it whole does.
struct MergedShards {
  nlohmann::json document;
  RunReport report;
};
MergedShards merge_shards(std::vector<nlohmann::json>&& reports);

}  // namespace kw::common
