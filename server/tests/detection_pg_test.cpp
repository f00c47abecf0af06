// What detection needs PostgreSQL itself for: binary arrays as the server
// writes and reads them, explanations (a flagged case's launches and build
// against its baseline run's), and the overview's status filter (the
// history reads). The rules of verdicts run over the in-memory store
// (detection_test.cpp).
#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "detection_fixture.hpp"
#include "server_fixture.hpp"
#include "store/pg_array.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

// Binary arrays through a real PostgreSQL: each element type as the server
// reads it (its text form back), NULLs and empty arrays, text it must not
// unescape, and array_send's output read back.
TEST(PgArrayTest, BinaryArraysRoundTripThroughPostgres) {
  TestDatabase database;
  pqxx::connection connection(database.url());
  pqxx::nontransaction tx(connection);  // a refused statement leaves the next one free to run
  auto text_of = [&](const std::string& cast, const pqxx::binarystring& param) {
    return tx.exec_params1("SELECT ($1::" + cast + ")::text", param)[0].as<std::string>();
  };
  PgBinaryArray<PgType::float4> floats;
  for (double value : {1.5, 2e-3, 123456.0, 1e18}) floats.add(value);
  EXPECT_EQ(text_of("real[]", floats.param()), "{1.5,0.002,123456,1e+18}");
  PgBinaryArray<PgType::float8> doubles;
  doubles.add(0.1);
  doubles.null();
  doubles.add(-2.5e-300);
  EXPECT_EQ(text_of("float8[]", doubles.param()), "{0.1,NULL,-2.5e-300}");
  PgBinaryArray<PgType::int2> shorts;
  shorts.add(-7);
  shorts.add(32767);
  EXPECT_EQ(text_of("smallint[]", shorts.param()), "{-7,32767}");
  PgBinaryArray<PgType::int4> ints;
  ints.add(-2147483647 - 1);
  ints.add(5);
  EXPECT_EQ(text_of("integer[]", ints.param()), "{-2147483648,5}");
  PgBinaryArray<PgType::int8> longs;
  longs.add(std::int64_t{1} << 40);
  EXPECT_EQ(text_of("bigint[]", longs.param()), "{1099511627776}");
  PgBinaryArray<PgType::boolean> flags;
  flags.add(true);
  flags.add(false);
  EXPECT_EQ(text_of("boolean[]", flags.param()), "{t,f}");
  PgBinaryArray<PgType::text> texts;
  for (const char* value : {"a\"b", "back\\slash", "{,}", "é中", ""}) texts.add(std::string_view(value));
  texts.null();
  EXPECT_EQ(tx.exec_params1("SELECT array_to_json($1::text[])::text", texts.param())[0].as<std::string>(),
            R"(["a\"b","back\\slash","{,}","é中","",null])");
  PgBinaryArray<PgType::jsonb> documents;
  documents.add(std::string_view(R"({"b": [1, 2], "a": "x"})"));
  documents.null();
  EXPECT_EQ(
      tx.exec_params1("SELECT array_to_json($1::jsonb[])::text", documents.param())[0].as<std::string>(),
      R"([{"a": "x", "b": [1, 2]},null])");
  EXPECT_EQ(text_of("real[]", PgBinaryArray<PgType::float4>().param()), "{}");
  // A wrong element type is refused by name, never misread.
  EXPECT_THROW(text_of("real[]", doubles.param()), pqxx::sql_error);

  EXPECT_EQ(parse_pg_binary_array<double>(
                tx.exec1("SELECT array_send('{1.5,0.25,3e+06}'::real[])")[0].as<std::string>()),
            (std::vector<double>{1.5, 0.25, 3e6}));
  EXPECT_EQ(parse_pg_binary_array<double>(tx.exec1("SELECT array_send('{}'::real[])")[0].as<std::string>()),
            std::vector<double>{});
  EXPECT_THROW(
      parse_pg_binary_array<double>(tx.exec1("SELECT array_send('{1,NULL}'::real[])")[0].as<std::string>()),
      std::runtime_error);
  EXPECT_THROW(parse_pg_binary_array<double>("\\x0001"), std::runtime_error);
  EXPECT_THROW(parse_pg_binary_array<double>("{1,2}"), std::runtime_error);
}

using DetectionPgTest = DetectionTest<ServerTest>;

// A flagged case says what changed against its baseline run: here the
// 8-warp variant of the attention kernel launched in place of the tuned
// 4-warp one (DESIGN.md's bug table), with its registers, shared memory,
// theoretical occupancy on the H100 and the build's spills.
TEST_F(DetectionPgTest, ExplanationNamesTheVariantLaunchedInPlaceOfTheTunedOne) {
  const std::string tuned = "void attention_forward_kernel<Traits<128, 4>, __half, false>(ForwardParams)";
  const std::string wide = "void attention_forward_kernel<Traits<128, 8>, __half, false>(ForwardParams)";
  auto post_variant = [&](double slowdown, const std::string& kernel, int threads, int registers, int shared,
                          int spills) {
    ReportSpec spec;
    spec.slowdown = slowdown;
    spec.commit = make_commit(next_commit_++);
    spec.seed = next_seed_++;
    json report = make_report(spec);
    for (json& c : report["cases"]) {
      c["launches"] = json::array({{{"kernel", kernel},
                                    {"grid", {8, 16, 1}},
                                    {"block", {threads, 1, 1}},
                                    {"registers", registers},
                                    {"static_smem", 0},
                                    {"dynamic_smem", shared}}});
    }
    // ptxas -v names the kernel mangled in the build log; this one's own spelling is enough to match.
    json build_row{{"name", kernel},
                   {"registers", registers},
                   {"shared_bytes", 0},
                   {"spill_stores", spills},
                   {"spill_loads", spills}};
    report["stages"][0]["details"] = {{"kernels", json::array({build_row})}};
    auto response = agent().post("/api/v1/runs", report);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["run_id"].get<std::int64_t>();
  };
  std::int64_t base = post_variant(1.0, tuned, 128, 96, 48 * 1024, 0);
  std::int64_t head = post_variant(1.25, wide, 256, 168, 160 * 1024, 64);
  auto response = client().get("/api/v1/runs/" + std::to_string(head) + "/explanation");
  ASSERT_EQ(response.status, 200) << response.body;
  json cases = response.json()["cases"];
  ASSERT_EQ(cases.size(), 3U) << response.body;
  json c = cases[0];
  EXPECT_EQ(c["status"], "regression");
  EXPECT_EQ(c["base"]["run_id"], base);
  EXPECT_EQ(c["changes"],
            json::array({"launches " + wide + ", which the base did not", "no longer launches " + tuned,
                         "block 128×1×1 → 256×1×1 (128 → 256 threads)", "registers 96 → 168 per thread",
                         "shared memory 48 KB → 160 KB per block",
                         "theoretical occupancy 25% → 13% (4 → 1 blocks per SM, limited by registers)",
                         "spill stores 0 → 64 bytes in " + wide, "spill loads 0 → 64 bytes in " + wide}))
      << c.dump(2);
  json occupancy = c["base"]["launches"][0]["occupancy"];
  EXPECT_EQ(occupancy["blocks_per_sm"], 4);
  EXPECT_EQ(occupancy["limited_by"], "shared memory");
  EXPECT_EQ(c["head"]["build"][0]["spill_stores"], 64);
  // A pull request measured A/B against the tuned commit: its base's launches
  // come from that commit's stored run.
  ReportSpec pr;
  pr.branch = "pr-7";
  pr.base_commit = client().get("/api/v1/runs/" + std::to_string(base)).json()["commit"];
  pr.replicates = 4;
  pr.ab = true;
  pr.slowdown = 1.25;
  pr.commit = make_commit(next_commit_++);
  pr.seed = next_seed_++;
  json pr_report = make_report(pr);
  for (json& pr_case : pr_report["cases"]) {
    pr_case["launches"] = json::array({{{"kernel", tuned},
                                        {"grid", {8, 16, 1}},
                                        {"block", {256, 1, 1}},
                                        {"registers", 96},
                                        {"static_smem", 0},
                                        {"dynamic_smem", 48 * 1024}}});
  }
  auto pr_run = agent().post("/api/v1/runs", pr_report).json();
  json ab = client().get("/api/v1/runs/" + pr_run["run_id"].dump() + "/explanation").json()["cases"];
  ASSERT_EQ(ab.size(), 3U) << ab.dump();
  EXPECT_EQ(ab[0]["base"]["run_id"], base);
  // Twice the warps, half the blocks: the same occupancy, said so.
  EXPECT_EQ(
      ab[0]["changes"],
      json::array({"block 128×1×1 → 256×1×1 (128 → 256 threads)",
                   "theoretical occupancy unchanged at 25% (4 → 2 blocks per SM, limited by registers)"}))
      << ab[0].dump(2);
  // One case by name, whatever its status: the base run's, compared with nothing.
  json named = client()
                   .get("/api/v1/runs/" + std::to_string(base) + "/explanation?case=attention.fwd/case1")
                   .json()["cases"];
  ASSERT_EQ(named.size(), 1U) << named.dump();
  EXPECT_EQ(named[0]["status"], "no-baseline");
  EXPECT_EQ(named[0]["base"], nullptr);
  EXPECT_EQ(named[0]["head"]["launches"][0]["threads"], 128);
  // Nothing flagged, nothing to explain; no such run, 404.
  EXPECT_EQ(client().get("/api/v1/runs/" + std::to_string(base) + "/explanation").json()["cases"],
            json::array());
  EXPECT_EQ(client().get("/api/v1/runs/999999/explanation").status, 404);
}

// A run whose case moved past its threshold without the evidence: the
// overview finds it by its status.
TEST_F(DetectionPgTest, TheOverviewFindsAnInconclusiveCaseByItsStatus) {
  ReportSpec base;
  base.noise = 0.0005;
  base.cases = 1;
  post(base);
  ReportSpec head = base;
  head.run_shift = 1.02;
  json answer = post(head);
  ASSERT_EQ(candidate_comparison(answer)["status"], "inconclusive");
  const json filtered = client().get("/api/v1/projects/demo/overview?status=inconclusive").json();
  ASSERT_EQ(filtered["cases"].size(), 1u) << filtered.dump();
  EXPECT_EQ(client().get("/api/v1/projects/demo/overview?status=regression").json()["cases"].size(), 0u);
}

}  // namespace
}  // namespace kw::server::testing
