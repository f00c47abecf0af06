// One job's cases measured by several GPUs at once (docs/detection.md,
// "Sharding"). Every shard lists the same cases (the same commit), so the
// split needs no coordination: the names in byte order, dealt round-robin,
// which spreads a kernel's neighbouring cases over the shards. Each shard
// measures its cases' base and head on its own GPU and reports them; the
// reports merge into one run, judged once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::common {

inline constexpr std::int64_t kMaxShards = 64;

struct ShardSpec {
  std::int64_t index = 0;  // 0-based
  std::int64_t count = 1;
};

// Parses "K/N" (1-based K, as `kw run --shard 2/4` says it); throws
// std::invalid_argument naming what is wrong.
ShardSpec parse_shard_spec(const std::string& text);
std::string to_string(const ShardSpec& shard);  // "2/4"

// Whether `name`, of all the cases `names`, is this shard's.
class ShardSplit {
 public:
  ShardSplit(std::vector<std::string> names, ShardSpec shard);
  bool contains(const std::string& name) const;
  // This shard's cases, in the order of `names` as given.
  std::vector<std::string> cases() const;

 private:
  std::vector<std::string> names_;  // as given
  std::vector<std::string> mine_;   // sorted
};

// The run made of every shard's report (each a valid run report carrying
// `shard`, all of one job): one report with every case once, stages combined
// (failed where any shard failed, the longest duration, GPU seconds summed),
// and `shards` saying which agent and GPU measured how many cases. Throws
// ValidationError naming the shard and what disagrees: another commit,
// base, project, GPU model or shard count, a missing or repeated shard, or
// a case two shards measured. A case that several shards checked but at
// most one measured (a harness whose preflight runs whole) is kept once.
nlohmann::json merge_shard_reports(const std::vector<nlohmann::json>& reports);

}  // namespace kw::common
