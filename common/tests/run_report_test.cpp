#include "kw/common/run_report.hpp"

#include <gtest/gtest.h>

#include "../../tests/support/broken_reports.hpp"

namespace kw::common {
namespace {

using nlohmann::json;

json example() {
  return kw::testing::load_example_report(KW_TEST_DATA_DIR);
}

TEST(RunReport, ExampleIsValidAndComplete) {
  RunReport report = parse_run_report(example());
  EXPECT_EQ(report.project, "kernelwatch");
  EXPECT_EQ(report.stages.size(), kAllStages.size());
  for (std::size_t i = 0; i < kAllStages.size(); ++i) {
    EXPECT_EQ(report.stages[i].name, kAllStages[i]);
    EXPECT_EQ(report.stages[i].status, StageStatus::passed);
  }
  ASSERT_GE(report.cases.size(), 3u);
  ASSERT_TRUE(report.device.has_value());
  EXPECT_EQ(report.device->sm_count, 132);
  for (const Case& c : report.cases) {
    ASSERT_NE(c.candidate(), nullptr) << c.name;
    EXPECT_GE(c.measurements.size(), 2u) << c.name;
    EXPECT_TRUE(c.correctness && c.correctness->passed) << c.name;
    EXPECT_FALSE(c.launches.empty()) << c.name;
  }
  EXPECT_EQ(report.cases[1].measurements[0].throttled_samples, std::vector<std::int64_t>{17});
}

TEST(RunReport, RoundTripsThroughJson) {
  RunReport first = parse_run_report(example());
  json written = to_json(first);
  RunReport second = parse_run_report(written);
  EXPECT_EQ(to_json(second), written);
  EXPECT_EQ(written, example()) << "to_json must write back what it read";
}

TEST(RunReport, AMinimumReplicateLocationRoundTripsAndTheDefaultIsNotWritten) {
  json report = example();
  report["cases"][0]["measurements"][0]["replicate_location"] = "minimum";
  RunReport parsed = parse_run_report(report);
  EXPECT_EQ(parsed.cases[0].measurements[0].replicate_location, ReplicateLocation::minimum);
  EXPECT_EQ(timing_of(parsed.cases[0].measurements[0]).rule, ReplicateLocation::minimum);
  EXPECT_EQ(to_json(parsed), report);
  report["cases"][0]["measurements"][0]["replicate_location"] = "trimmed_mean";
  EXPECT_EQ(to_json(parse_run_report(report)), example());
}

TEST(RunReport, OptionalPartsMayBeAbsent) {
  json report = example();
  report.erase("base_commit");
  report.erase("job_id");
  report.erase("device");
  report["cases"] = json::array();
  report["stages"] = json::array(
      {{{"name", "build"}, {"status", "passed"}, {"duration_ms", 10}},
       {{"name", "load"}, {"status", "skipped"}, {"duration_ms", 0}, {"message", "no CUDA device"}}});
  RunReport parsed = parse_run_report(report);
  EXPECT_FALSE(parsed.device);
  EXPECT_FALSE(parsed.base_commit);
  EXPECT_EQ(parsed.stages[1].message, "no CUDA device");
}

// What git says of the commit, and the thresholds committed with it and its
// base, go through as written; a case without its own threshold takes the
// commit's min_threshold, and none at all the project's (nullopt).
TEST(RunReport, CommitInfoAndThresholdsRoundTrip) {
  json report = example();
  report["git"] = {{"tree", std::string(40, 'b')},
                   {"parents", {std::string(40, 'c'), std::string(40, 'd')}},
                   {"author", "Ada Lovelace"},
                   {"subject", "Merge pull request #7"},
                   {"committed_at", "2026-03-02T17:40:00Z"}};
  report["thresholds"] = {{"min_threshold", 0.01}, {"cases", {{"attention.fwd/fp16/b1_h1_s128_d64", 0.05}}}};
  report["base_thresholds"] = json::object();
  RunReport parsed = parse_run_report(report);
  ASSERT_TRUE(parsed.git);
  EXPECT_EQ(parsed.git->parents.size(), 2U);
  EXPECT_EQ(parsed.git->subject, "Merge pull request #7");
  EXPECT_EQ(to_json(parsed), report);
  ASSERT_TRUE(parsed.thresholds && parsed.base_thresholds);
  EXPECT_EQ(parsed.base_thresholds->for_case("other"), std::nullopt);
  EXPECT_EQ(parsed.thresholds->for_case("attention.fwd/fp16/b1_h1_s128_d64"), 0.05);
  EXPECT_EQ(parsed.thresholds->for_case("other"), 0.01);
  EXPECT_EQ(Thresholds{}.for_case("other"), std::nullopt);
}

// Which threshold judges a case, and why: kernelwatch.json's, else the
// project's; a pull request by the stricter of its own and its base's.
TEST(RunReport, ACasesThresholdIsTheCommitsElseTheProjectsAndThePullRequestsTheStricter) {
  const CaseThreshold project{0.03, "project setting"};
  const Thresholds own{0.02, {{"k/tight", 0.005}}};
  const std::string head(40, 'a'), base_commit(40, 'b');
  CaseThreshold chosen = case_threshold("k/x", project, own, head, std::nullopt, "");
  EXPECT_EQ(chosen.value, 0.02);
  EXPECT_EQ(chosen.source, "kernelwatch.json at aaaaaaaaaaaa");
  EXPECT_EQ(case_threshold("k/x", project, std::nullopt, head, std::nullopt, "").source, "project setting");
  EXPECT_EQ(case_threshold("k/tight", project, own, head, std::nullopt, "").value, 0.005);
  // A pull request that loosens its threshold is judged by its base's.
  const Thresholds loosened{0.10, {}};
  chosen = case_threshold("k/x", project, loosened, head, own, base_commit);
  EXPECT_EQ(chosen.value, 0.02);
  EXPECT_EQ(chosen.source,
            "kernelwatch.json at bbbbbbbbbbbb (the base's, stricter than kernelwatch.json at "
            "aaaaaaaaaaaa)");
  EXPECT_EQ(case_threshold("k/x", project, own, head, loosened, base_commit).value, 0.02)
      << "its own, stricter";
}

// The stages are one table (stages.hpp); a report naming another is refused by name.
TEST(RunReport, TheStagesAreTheTablesAndAnUnknownOneIsNamed) {
  EXPECT_EQ(preflight_stages(), (std::vector<StageName>{StageName::load, StageName::launch_geometry,
                                                        StageName::correctness, StageName::quick_bench}));
  EXPECT_EQ(stage_name_from("quick_bench"), StageName::quick_bench);
  EXPECT_FALSE(stage_row(StageName::full_bench).failure_skips_later)
      << "a failed full_bench skips nothing after it";
  json report = example();
  report["stages"][1]["name"] = "warm_up";
  try {
    parse_run_report(report);
    FAIL() << "a stage named warm_up taken";
  } catch (const ValidationError& error) {
    EXPECT_EQ(
        std::string(error.what()),
        "stages[1].name: unknown stage \"warm_up\" (expected build, load, launch_geometry, correctness, "
        "quick_bench or full_bench)");
  }
}

TEST(RunReport, AProjectsDetectionSettingsTravelWithAJobAndBadOnesAreNamed) {
  DetectionSettings settings;
  settings.run_alpha = 0.05;
  settings.min_threshold = 0.02;
  const DetectionSettings back = parse_project_detection(project_detection_json(settings), "d");
  EXPECT_EQ(back.run_alpha, 0.05);
  EXPECT_EQ(back.min_threshold, 0.02);
  EXPECT_EQ(back.resolution, DetectionSettings{}.resolution)
      << "the rule's own constants are not the project's";
  try {
    parse_project_detection(json{{"run_alpha", 0.5}}, "project_detection");
    FAIL() << "run_alpha 0.5 taken";
  } catch (const ValidationError& error) {
    EXPECT_NE(std::string(error.what()).find("project_detection.run_alpha: must be in (0, 0.2"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(parse_project_detection(json{{"screen_alpha", 0.1}}, "d"), ValidationError);
}

// A CPU benchmark on a host without a GPU: its device is the host's CPU,
// with no compute capability or SM count, and it round-trips as such.
TEST(RunReport, ACpuDeviceNeedsNoGpuFields) {
  json report = example();
  report["device"] = {
      {"kind", "cpu"}, {"name", "AMD EPYC 9654 96-Core Processor"}, {"memory_bytes", 25000000000}};
  RunReport parsed = parse_run_report(report);
  ASSERT_TRUE(parsed.device);
  EXPECT_EQ(parsed.device->kind, "cpu");
  EXPECT_EQ(parsed.device->compute_capability, "");
  json written = to_json(parsed);
  EXPECT_EQ(written["device"]["kind"], "cpu");
  EXPECT_FALSE(written["device"].contains("compute_capability"));
  EXPECT_EQ(to_json(parse_run_report(written)), written);
}

TEST(RunReport, SyntaxErrorNamesTheByte) {
  try {
    parse_run_report_text("{\"schema\": ");
    FAIL() << "expected a ValidationError";
  } catch (const ValidationError& error) {
    EXPECT_TRUE(std::string(error.what()).starts_with("report: not valid JSON at byte 12")) << error.what();
  }
}

// A fingerprint holds a digest with its parts, or says why it is unknown:
// other keys, both at once, or parts by the ten thousand are refused,
// naming the field.
TEST(RunReport, AFingerprintsShapeAndSizeAreChecked) {
  auto refusal = [](const json& fingerprint) -> std::string {
    json report = example();
    report["cases"][0]["fingerprint"] = fingerprint;
    try {
      parse_run_report(report);
      return "accepted";
    } catch (const ValidationError& error) {
      return error.path() + " " + error.code();
    }
  };
  const std::string digest(64, 'a');
  EXPECT_EQ(refusal({{"digest", digest}, {"parts", {{"kernels", {{"k", "x"}}}}}}), "accepted");
  EXPECT_EQ(refusal({{"unknown", "no injection library"}}), "accepted");
  EXPECT_EQ(refusal({{"digest", digest}, {"parts", json::object()}, {"colour", "red"}}),
            "cases[0].fingerprint.colour unknown_field");
  EXPECT_EQ(refusal({{"digest", digest}, {"parts", json::object()}, {"unknown", "why"}}),
            "cases[0].fingerprint inconsistent");
  EXPECT_EQ(refusal({{"unknown", "why"}, {"parts", json::object()}}),
            "cases[0].fingerprint.parts inconsistent");
  json many = json::object();
  for (int i = 0; i < 40000; ++i) many["p" + std::to_string(i)] = "x";
  EXPECT_EQ(refusal({{"digest", digest}, {"parts", many}}), "cases[0].fingerprint.parts too_large");
}

// What a timed case's fingerprint changed from the base's: a few lines of
// text and the base's side, its digest or why it has none; refused with the
// field named otherwise, and on a case that claims identical code.
TEST(RunReport, ChangedFromBaseIsAFewLinesAndTheBasesSide) {
  auto refusal = [](const json& changed, bool identical = false) -> std::string {
    json report = example();
    report["cases"][0]["changed_from_base"] = changed;
    if (identical) {
      report["cases"][0]["fingerprint"] = {{"digest", std::string(64, 'a')}, {"parts", json::object()}};
      report["cases"][0]["identical_to_base"] = true;
      report["cases"][0].erase("measurements");
    }
    try {
      const json stored = common::to_json(parse_run_report(report));
      return stored["cases"][0]["changed_from_base"] == changed ? "accepted" : "changed on the way";
    } catch (const ValidationError& error) {
      return error.path() + " " + error.code();
    }
  };
  const std::string digest(64, 'b');
  EXPECT_EQ(refusal({{"differs", {"the code of kernel k"}}, {"base", {{"digest", digest}}}}), "accepted");
  EXPECT_EQ(
      refusal({{"differs", {"the base has no fingerprint: none"}}, {"base", {{"unknown", "no records"}}}}),
      "accepted");
  EXPECT_EQ(refusal({{"differs", json::array()}, {"base", {{"digest", digest}}}}),
            "cases[0].changed_from_base.differs missing_field");
  EXPECT_EQ(refusal({{"differs", {"x"}}, {"base", {{"digest", "abc"}}}}),
            "cases[0].changed_from_base.base missing_field");
  EXPECT_EQ(refusal({{"differs", {"x"}}, {"base", {{"digest", digest}}}, {"colour", 1}}),
            "cases[0].changed_from_base.colour unknown_field");
  EXPECT_EQ(refusal({{"differs", {std::string(2000, 'x')}}, {"base", {{"digest", digest}}}}),
            "cases[0].changed_from_base.differs[0] invalid_value");
  EXPECT_EQ(refusal({{"differs", json(std::vector<std::string>(65, "x"))}, {"base", {{"digest", digest}}}}),
            "cases[0].changed_from_base.differs too_large");
  EXPECT_EQ(refusal({{"differs", {"x"}}, {"base", {{"digest", digest}}}}, true),
            "cases[0].changed_from_base inconsistent");
}

TEST(RunReport, CommitShaRules) {
  EXPECT_TRUE(is_commit_sha("3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a"));
  EXPECT_FALSE(is_commit_sha("3F2A9C1E5B7D4A6F8E0C2B4D6F8A0C2E4B6D8F0A"));
  EXPECT_FALSE(is_commit_sha("3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0"));
  EXPECT_FALSE(is_commit_sha(""));
}

TEST(RunReport, Rfc3339) {
  // 2026-11-21T10:00:00Z = 1795255200 s (GNU date -u -d 2026-11-21T10:00:00Z +%s).
  EXPECT_DOUBLE_EQ(*parse_rfc3339("2026-11-21T10:00:00Z"), 1795255200.0);
  EXPECT_DOUBLE_EQ(*parse_rfc3339("2026-11-21T11:00:00+01:00"), 1795255200.0);
  EXPECT_DOUBLE_EQ(*parse_rfc3339("1970-01-01T00:00:00.250Z"), 0.25);
  EXPECT_FALSE(parse_rfc3339("2026-11-21 10:00:00"));
  EXPECT_FALSE(parse_rfc3339("2026-13-21T10:00:00Z"));
  EXPECT_FALSE(parse_rfc3339("2026-11-21T10:00:00Zjunk"));
}

// A report of `count` cases, each the example's first under its own name:
// enough for its cases to be read on several threads.
json many_cases(std::size_t count) {
  json report = example();
  const json first = report["cases"][0];
  report["cases"] = json::array();
  for (std::size_t i = 0; i < count; ++i) {
    json c = first;
    c["name"] = "case/" + std::to_string(i);
    report["cases"].push_back(std::move(c));
  }
  return report;
}

TEST(RunReport, CasesReadInPartsKeepTheirOrderAndTheFirstFaultIsNamed) {
  json report = many_cases(3000);
  RunReport read = parse_run_report(report);
  ASSERT_EQ(read.cases.size(), 3000u);
  for (std::size_t i = 0; i < read.cases.size(); ++i)
    ASSERT_EQ(read.cases[i].name, "case/" + std::to_string(i));

  // Faults in several parts: the one earliest in the report is named, a
  // fault of one case before a duplicate name later on, and the other way.
  json broken = report;
  broken["cases"][2900]["measurements"][0]["samples_ns"][0] = -1;
  broken["cases"][1700]["measurements"][0]["impl"] = "nobody";
  try {
    parse_run_report(broken);
    FAIL() << "accepted a broken report";
  } catch (const ValidationError& error) {
    EXPECT_EQ(error.path(), "cases[1700].measurements[0].impl");
  }
  broken["cases"][1200]["name"] = "case/5";
  try {
    parse_run_report(broken);
    FAIL() << "accepted a duplicate case name";
  } catch (const ValidationError& error) {
    EXPECT_EQ(error.path(), "cases[1200].name");
    EXPECT_EQ(error.code(), "duplicate");
  }
}

class BrokenReportTest : public ::testing::TestWithParam<kw::testing::BrokenReport> {};

TEST_P(BrokenReportTest, IsRejectedNamingTheField) {
  json report = example();
  GetParam().mutate(report);
  try {
    parse_run_report(report);
    FAIL() << "accepted a broken report";
  } catch (const ValidationError& error) {
    if (GetParam().expected_message.empty()) {
      EXPECT_TRUE(
          std::string(error.what()).starts_with("cases[0].measurements[0].median_ns: is 1.0 but the median"))
          << error.what();
    } else {
      EXPECT_EQ(error.what(), GetParam().expected_message);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, BrokenReportTest, ::testing::ValuesIn(kw::testing::broken_reports()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace kw::common
