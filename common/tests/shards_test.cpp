#include "kw/common/shards.hpp"

#include <gtest/gtest.h>

#include "../../tests/support/broken_reports.hpp"
#include "kw/common/run_report.hpp"

namespace kw::common {
namespace {

using nlohmann::json;

TEST(ShardSpec, ParsesOneBasedKOfN) {
  const ShardSpec spec = parse_shard_spec("2/4");
  EXPECT_EQ(spec.index, 1);
  EXPECT_EQ(spec.count, 4);
  EXPECT_EQ(to_string(spec), "2/4");
  for (const char* bad : {"0/2", "3/2", "1/0", "1/65", "2", "a/2", "1/2x", ""}) {
    EXPECT_THROW(parse_shard_spec(bad), std::invalid_argument) << bad;
  }
}

// Every case in exactly one shard, the counts within one of each other, and
// a kernel's neighbouring cases (names sorting together) spread over them.
TEST(ShardSplit, DealsEveryCaseToExactlyOneShardEvenly) {
  std::vector<std::string> names;
  for (int kernel = 0; kernel < 7; ++kernel) {
    for (int shape = 0; shape < 13; ++shape)
      names.push_back("gemm/k" + std::to_string(kernel) + "/s" + (shape < 10 ? "0" : "") +
                      std::to_string(shape));
  }
  std::reverse(names.begin(), names.end());  // the bench's order is not the split's
  for (std::int64_t count : {1, 2, 3, 4, 8}) {
    std::map<std::string, int> owners;
    std::size_t fewest = names.size(), most = 0;
    for (std::int64_t index = 0; index < count; ++index) {
      const ShardSplit split(names, {index, count});
      const std::vector<std::string> mine = split.cases();
      fewest = std::min(fewest, mine.size());
      most = std::max(most, mine.size());
      for (const std::string& name : mine) {
        ++owners[name];
        EXPECT_TRUE(split.contains(name));
      }
      // In the bench's order.
      for (std::size_t i = 1; i < mine.size(); ++i) EXPECT_GT(mine[i - 1], mine[i]);
      if (count > 1) {
        int of_k0 = 0;
        for (const std::string& name : mine) of_k0 += name.starts_with("gemm/k0/");
        EXPECT_GE(of_k0, 13 / count) << "shard " << index << " of " << count;
      }
    }
    EXPECT_EQ(owners.size(), names.size());
    for (const auto& [name, n] : owners) EXPECT_EQ(n, 1) << name;
    EXPECT_LE(most - fewest, 1u) << count;
  }
}

json example() {
  return kw::testing::load_example_report(KW_TEST_DATA_DIR);
}

// The example report cut in two: shard 1 has the first case, shard 2 the
// rest, each with its own stages, times and GPU.
std::vector<json> two_shards() {
  json one = example(), two = example();
  one["cases"] = json::array({example()["cases"][0]});
  two["cases"].erase(0);
  one["shard"] = {{"index", 1}, {"count", 2}};
  two["shard"] = {{"index", 2}, {"count", 2}};
  one["job_id"] = 41;
  two["job_id"] = 42;
  two["agent"]["name"] = "gpu-host-b";
  two["device"]["uuid"] = "GPU-bbbbbbbb";
  two["started_at"] = "2026-03-01T11:59:00Z";
  two["finished_at"] = "2099-01-01T00:00:00Z";
  one["gpu_seconds"] = 10.0;
  two["gpu_seconds"] = 32.5;
  for (json& stage : one["stages"]) stage["duration_ms"] = 1000;
  for (json& stage : two["stages"]) stage["duration_ms"] = 2000;
  two["stages"][5]["status"] = "failed";
  two["stages"][5]["message"] = "attention: 2 cases failed";
  two["stages"][5]["log_tail"] = "the second shard's tail";
  return {two, one};  // in any order
}

TEST(MergeShardReports, OneRunWithEveryCaseOnceAndTheStagesCombined) {
  const std::vector<json> shards = two_shards();
  const json merged = merge_shard_reports(shards);
  const RunReport run = parse_run_report(merged);
  EXPECT_FALSE(run.shard);
  EXPECT_FALSE(run.job_id) << "the job they were split from is the run's";
  ASSERT_EQ(run.cases.size(), example()["cases"].size());
  EXPECT_EQ(run.cases[0].name, example()["cases"][0]["name"].get<std::string>()) << "shard 1's cases first";
  EXPECT_DOUBLE_EQ(run.gpu_seconds, 42.5);
  EXPECT_EQ(run.started_at, "2026-03-01T11:59:00Z");
  EXPECT_EQ(run.finished_at, "2099-01-01T00:00:00Z");
  ASSERT_EQ(run.stages.size(), kAllStages.size());
  EXPECT_EQ(run.stages[0].duration_ms, 2000) << "shards run side by side: the longest";
  EXPECT_EQ(run.stages[5].status, StageStatus::failed) << "failed where any shard failed";
  EXPECT_NE(run.stages[5].message.find("shard 2: attention: 2 cases failed"), std::string::npos)
      << run.stages[5].message;
  EXPECT_NE(run.stages[5].log_tail.find("--- shard 2\nthe second shard's tail"), std::string::npos);
  EXPECT_EQ(merged["stages"][5]["details"]["shards"].size(), 2u);
  EXPECT_EQ(merged["stages"][0]["details"], example()["stages"][0]["details"]) << "one build";
  ASSERT_EQ(run.shards.size(), 2u);
  EXPECT_EQ(run.shards[0].index, 1);
  EXPECT_EQ(run.shards[0].job_id, 41);
  EXPECT_EQ(run.shards[0].cases, 1);
  EXPECT_EQ(run.shards[1].agent, "gpu-host-b");
  EXPECT_EQ(run.shards[1].gpu_uuid, "GPU-bbbbbbbb");
  EXPECT_EQ(to_json(run), merged) << "the merged run writes back as read";
}

TEST(MergeShardReports, RefusesShardsThatAreNotOneJobsParts) {
  auto refused = [](const std::vector<json>& shards, const std::string& path, const std::string& words) {
    try {
      merge_shard_reports(shards);
      ADD_FAILURE() << "merged: " << path;
    } catch (const ValidationError& error) {
      EXPECT_EQ(error.path(), path) << error.what();
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  std::vector<json> shards = two_shards();
  refused({shards[0]}, "shards", "1 report(s) of a job split in 2");
  shards[0]["commit"] = std::string(40, 'f');
  refused(shards, "shard 2/2.commit", "measure one commit");
  shards = two_shards();
  shards[0]["device"]["name"] = "NVIDIA H200";
  refused(shards, "shard 2/2.device.name", "one GPU model");
  shards = two_shards();
  shards[0]["shard"]["index"] = 1;
  refused(shards, "shard 1/2", "appears twice, and shard 2 is missing");
  shards = two_shards();
  shards[0]["cases"].push_back(example()["cases"][0]);
  refused(shards, "shard 2/2.cases", "is also measured by shard 1");
  shards = two_shards();
  shards[1].erase("shard");
  refused(shards, "shards[1].shard", "no shard's");
  shards = two_shards();
  shards[1]["commit"] = "nope";
  refused(shards, "shards[1].commit", "40-character");
}

// A harness whose preflight runs whole in every shard (Google Benchmark)
// reports each case's checks from every shard: kept once, the measured
// shard's entry.
TEST(MergeShardReports, ACaseCheckedByEveryShardButMeasuredByOneIsKeptOnce) {
  std::vector<json> shards = two_shards();
  json checked_only = example()["cases"][0];
  checked_only.erase("measurements");
  checked_only["params"] = {{"from", "shard 2's preflight"}};
  shards[0]["cases"].push_back(checked_only);  // shard 2 checked shard 1's case too
  const json merged = merge_shard_reports(shards);
  ASSERT_EQ(merged["cases"].size(), example()["cases"].size());
  EXPECT_EQ(merged["cases"][0], example()["cases"][0]) << "the measured entry";
  shards[1]["cases"][0].erase("measurements");  // measured by none: the first kept
  shards[1]["cases"][0]["params"] = {{"from", "shard 1's preflight"}};
  EXPECT_EQ(merge_shard_reports(shards)["cases"][0]["params"]["from"], "shard 1's preflight");
}

// One shard's failed correctness check fails the case in the merged run, as
// the same data unsharded does, whichever shard measured it.
TEST(MergeShardReports, ACaseFailedByOneShardsCheckFailsInTheMergedRun) {
  std::vector<json> shards = two_shards();
  json failed_check = example()["cases"][0];
  failed_check.erase("measurements");
  failed_check["correctness"]["passed"] = false;
  failed_check["correctness"]["rel_l2_err"] = 0.5;
  shards[0]["cases"].push_back(failed_check);  // shard 2 checked shard 1's case, and it failed
  ASSERT_TRUE(shards[1]["cases"][0]["correctness"]["passed"].get<bool>());
  const json merged = merge_shard_reports(shards);
  const json& kept = merged["cases"][0];
  EXPECT_FALSE(kept["correctness"]["passed"].get<bool>()) << kept["correctness"].dump();
  EXPECT_EQ(kept["correctness"]["rel_l2_err"], 0.5);
  EXPECT_EQ(kept["measurements"], example()["cases"][0]["measurements"]) << "still the measured entry";
}

// A shard whose stage says nothing adds no empty "shard N: " to the message.
TEST(MergeShardReports, AMergedStageMessageNamesOnlyShardsThatSaidSomething) {
  std::vector<json> shards = two_shards();
  shards[1]["stages"][5]["message"] = "";
  const json merged = merge_shard_reports(shards);
  EXPECT_EQ(merged["stages"][5]["message"], "shard 2: attention: 2 cases failed");
}

TEST(RunReport, ShardFieldsAreValidated) {
  json report = example();
  report["shard"] = {{"index", 3}, {"count", 2}};
  EXPECT_THROW(parse_run_report(report), ValidationError);
  report["shard"] = {{"index", 1}, {"count", 65}};
  EXPECT_THROW(parse_run_report(report), ValidationError);
  report["shard"] = {{"index", 1}, {"count", 2}};
  EXPECT_EQ(parse_run_report(report).shard->index, 0);
  report["shards"] = json::array({{{"index", 1}, {"agent", "a"}, {"cases", 3}}});
  EXPECT_THROW(parse_run_report(report), ValidationError) << "a shard is not made of shards";
  report.erase("shard");
  report["shards"][0]["index"] = 2;
  EXPECT_THROW(parse_run_report(report), ValidationError) << "in order, each once";
}

}  // namespace
}  // namespace kw::common
