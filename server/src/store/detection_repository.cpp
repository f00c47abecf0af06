#include "store/detection_repository.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <set>
#include <unordered_map>

#include "errors.hpp"
#include "kw/common/acknowledgement.hpp"
#include "kw/common/in_parts.hpp"
#include "kw/common/judge.hpp"
#include "kw/common/stats.hpp"
#include "store/pg_array.hpp"
#include "store/replicate_blocks.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

using common::Measurement;
using nlohmann::json;

const std::size_t kHistoryRuns = common::DetectionSettings{}.history_runs;

// The newest completed run of each named case on this GPU model, at a given
// commit ($4 = 'commit') or on a branch ($4 = 'branch'); $5 names which.
// A baseline is a run whose candidate samples are still kept: one whose
// samples retention dropped would judge nothing (every comparison
// no-baseline, and a regression would pass). $6: whether such runs are the
// ones asked for instead (to say why a base commit has no baseline).
constexpr const char* kBaseline = R"sql(
SELECT w.name, b.run_id, b.commit_sha, b.case_id
FROM unnest($1::text[]) AS w(name)
CROSS JOIN LATERAL (
  SELECT r.id AS run_id, r.commit_sha, c.id AS case_id
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3
    AND r.verdict IN ('pass', 'improvement', 'regression')
    AND CASE WHEN $4 = 'commit' THEN r.commit_sha = $5 ELSE r.branch = $5 END
    AND EXISTS (SELECT 1 FROM samples s WHERE s.case_id = c.id AND s.side = 'head' AND s.impl = 'candidate') <> $6
  ORDER BY c.run_id DESC
  LIMIT 1) AS b
)sql";

// A case's history: its candidate's per-run location over its newest
// completed runs on the default branch on this GPU model, oldest first, of
// runs stored under the current rule (kw/common/detection.hpp, kRuleVersion).
// Nearly every run measures the same cases, so the history is first read from
// the newest runs as a whole (one index scan on runs, then their one row each
// in run_locations); only a case missing from some of them is looked up on its
// own.
constexpr const char* kRecentRuns = R"sql(
SELECT id FROM runs
WHERE project_id = $1 AND gpu_model = $2 AND branch = $3 AND id <> $4
  AND verdict IN ('pass', 'improvement', 'regression') AND rule_version = $6
ORDER BY id DESC
LIMIT $5
)sql";

// Every case of those runs: filtering by name here costs more than in the caller.
constexpr const char* kLocationsInRuns = R"sql(
SELECT u.name, l.run_id, u.location, u.replicates, u.replicate_sd, u.clock_mhz, u.clock_sxx, u.clock_sxy
FROM run_locations l,
     unnest(l.case_names, l.locations, l.replicate_counts, l.replicate_sds, l.clock_mhz, l.clock_sxx, l.clock_sxy)
       AS u(name, location, replicates, replicate_sd, clock_mhz, clock_sxx, clock_sxy)
WHERE l.run_id = ANY($1::bigint[])
ORDER BY l.run_id
)sql";

constexpr const char* kLocationsOfCase = R"sql(
SELECT w.name, h.run_id, h.location, h.replicates, h.replicate_sd, h.clock_mhz, h.clock_sxx, h.clock_sxy
FROM unnest($1::text[]) AS w(name)
CROSS JOIN LATERAL (
  SELECT c.run_id, c.candidate_location_ns AS location, c.candidate_replicates AS replicates,
         c.candidate_replicate_sd AS replicate_sd, c.candidate_clock_mhz AS clock_mhz,
         c.candidate_clock_sxx AS clock_sxx, c.candidate_clock_sxy AS clock_sxy
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3 AND r.branch = $4 AND r.id <> $5
    AND r.verdict IN ('pass', 'improvement', 'regression') AND c.candidate_location_ns IS NOT NULL
    AND r.rule_version = $7
  ORDER BY c.run_id DESC
  LIMIT $6) AS h
ORDER BY w.name, h.run_id
)sql";

// A measurement whose samples retention dropped is not read: a baseline
// without samples is judged as none (store/sample_retention.hpp). Samples
// and clocks in binary (array_send), nothing to format or parse; the median
// for the comparison's ratio of medians.
constexpr const char* kMeasurementsOf = R"sql(
SELECT m.case_id, m.impl, array_send(s.samples_ns), COALESCE(s.throttled_samples, '{}')::text,
       COALESCE(s.replicates, '{}')::text, COALESCE(s.replicate_sizes, '{}')::text,
       array_send(COALESCE(s.sm_mhz, '{}')), COALESCE(s.energy_j, '{}')::text, m.replicate_location, m.median_ns
FROM measurements m
JOIN samples s ON s.case_id = m.case_id AND s.side = m.side AND s.impl = m.impl
WHERE m.case_id = ANY($1::bigint[]) AND m.side = 'head'
)sql";

// Comparisons as parallel arrays in binary form (store/pg_array.hpp), one
// element per row: one round trip, nothing for PostgreSQL to parse but the
// first-pass objects.
constexpr const char* kInsertComparisons = R"sql(
INSERT INTO comparisons (run_id, case_name, kind, impl, baseline_run_id, baseline_reason, status, ratio,
                         ratio_of_medians, lower, upper, confidence, p_value, threshold, head_noise, base_noise,
                         head_samples, base_samples, excluded_throttled, note, method, se, df, first_pass,
                         threshold_source, detectable)
SELECT $1, t.*
FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::float8[], $9::float8[],
            $10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::float8[], $15::float8[], $16::float8[],
            $17::integer[], $18::integer[], $19::integer[], $20::text[], $21::text[], $22::float8[], $23::float8[],
            $24::jsonb[], $25::text[], $26::float8[])
  AS t(case_name, kind, impl, baseline_run_id, baseline_reason, status, ratio, ratio_of_medians, lower, upper,
       confidence, p_value, threshold, head_noise, base_noise, head_samples, base_samples, excluded_throttled, note,
       method, se, df, first_pass, threshold_source, detectable)
)sql";

// `match`: "commit" or "branch", `key` the commit or branch name.
std::map<std::string, Baseline> find_baselines(pqxx::work& tx, const std::vector<std::string>& names,
                                               std::int64_t project_id, const std::string& gpu,
                                               const std::string& match, const std::string& key,
                                               const std::string& reason, bool expired = false) {
  std::map<std::string, Baseline> found;
  if (names.empty()) return found;
  PgArray wanted;
  for (const std::string& name : names) wanted.text(name);
  for (const auto& row :
       tx.exec_prepared("detection_baseline", wanted.str(), project_id, gpu, match, key, expired)) {
    Baseline b{row[1].as<std::int64_t>(), row[2].as<std::string>(), row[3].as<std::int64_t>(), ""};
    b.reason = reason + " (run " + std::to_string(b.run_id) + ", commit " + b.commit.substr(0, 12) + ")";
    found[row[0].as<std::string>()] = b;
  }
  return found;
}

std::map<std::int64_t, std::vector<Measurement>> load_measurements(
    pqxx::work& tx, const std::vector<std::int64_t>& case_ids) {
  std::map<std::int64_t, std::vector<Measurement>> by_case;
  if (case_ids.empty()) return by_case;
  PgBinaryArray<PgType::int8> ids;
  for (std::int64_t id : case_ids) ids.add(id);
  for (const auto& row : tx.exec_prepared("detection_measurements", ids.param())) {
    Measurement m;
    m.impl = row[1].as<std::string>();
    m.samples_ns = parse_pg_binary_array<double>(std::string_view(row[2].c_str(), row[2].size()));
    m.throttled_samples = parse_pg_array<std::int64_t>(row[3].c_str());
    m.replicates = parse_pg_array<std::int64_t>(row[4].c_str());
    if (m.replicates.empty()) m.replicates = replicate_tags(parse_pg_array<std::int64_t>(row[5].c_str()));
    m.sm_mhz = parse_pg_binary_array<double>(std::string_view(row[6].c_str(), row[6].size()));
    m.energy_j = parse_pg_array<double>(row[7].c_str());
    m.median_ns = row[9].as<double>();
    if (!row[8].is_null()) {
      std::optional<common::ReplicateLocation> rule = common::replicate_location_from(row[8].c_str());
      if (!rule)
        throw std::runtime_error("unknown replicate_location in the database: " + row[8].as<std::string>());
      m.replicate_location = *rule;
    }
    by_case[row[0].as<std::int64_t>()].push_back(std::move(m));
  }
  return by_case;
}

// A field's number (pqxx's own parse is slow: pg_array.hpp).
template <typename T>
T number_of(const pqxx::field& field) {
  return parse_pg_number<T>(std::string_view(field.c_str(), field.size()));
}

// The comparisons' columns, an element a row (kInsertComparisons); the
// reason and threshold source most rows share go with the run instead.
struct ComparisonColumns {
  std::string common_reason, common_source;
  double confidence_level = 0;
  PgBinaryArray<PgType::text> case_name, kind, impl, reason, status, note, method, threshold_source;
  PgBinaryArray<PgType::int8> baseline_run;
  PgBinaryArray<PgType::float8> ratio, ratio_of_medians, lower, upper, confidence, p_value, threshold,
      head_noise, base_noise, se, df, detectable;
  PgBinaryArray<PgType::int4> head_samples, base_samples, excluded;
  PgBinaryArray<PgType::jsonb> first_pass;

  void add(const ComparisonRow& row) {
    const common::CaseTest& t = row.test;
    case_name.add(row.case_name);
    kind.add(row.kind);
    impl.add(row.impl);
    row.baseline ? baseline_run.add(row.baseline->run_id) : baseline_run.null();
    const std::string why = row.reason_text();
    why == common_reason ? reason.null() : reason.add(why);
    status.add(common::to_string(row.status));
    const bool measured = row.measured();
    for (auto [array, value] : {std::pair{&ratio, t.ratio},
                                {&ratio_of_medians, row.ratio_of_medians},
                                {&lower, t.lower},
                                {&upper, t.upper},
                                {&confidence, confidence_level},
                                {&p_value, t.p_value},
                                {&threshold, row.min_threshold},
                                {&head_noise, t.head_replicate_sd},
                                {&base_noise, t.base_replicate_sd},
                                {&se, t.se},
                                {&df, t.df}}) {
      measured ? array->add(value) : array->null();
    }
    row.detectable ? detectable.add(*row.detectable) : detectable.null();
    if (measured) {
      head_samples.add(t.head_replicates);
      base_samples.add(t.base_replicates);
      method.add(common::to_string(t.method));
    } else {
      head_samples.null();
      base_samples.null();
      method.null();
    }
    excluded.add(row.excluded_throttled);
    note.add(t.note);
    row.threshold_source == common_source ? threshold_source.null()
                                          : threshold_source.add(row.threshold_source);
    row.first_pass ? first_pass.add(row.first_pass_json().dump()) : first_pass.null();
  }

  void insert(pqxx::work& tx, std::int64_t run_id) const {
    tx.exec_prepared0(
        "detection_insert", run_id, case_name.param(), kind.param(), impl.param(), baseline_run.param(),
        reason.param(), status.param(), ratio.param(), ratio_of_medians.param(), lower.param(), upper.param(),
        confidence.param(), p_value.param(), threshold.param(), head_noise.param(), base_noise.param(),
        head_samples.param(), base_samples.param(), excluded.param(), note.param(), method.param(),
        se.param(), df.param(), first_pass.param(), threshold_source.param(), detectable.param());
  }
};

void insert_comparisons(pqxx::work& tx, std::int64_t run_id, const std::vector<ComparisonRow>& rows,
                        const common::DetectionSettings& settings) {
  if (rows.empty()) return;
  auto most_common = [&](auto text_of) {
    std::map<std::string, std::size_t> counts;
    for (const ComparisonRow& row : rows) ++counts[text_of(row)];
    return std::max_element(counts.begin(), counts.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  };
  ComparisonColumns columns;
  columns.common_reason = most_common([](const ComparisonRow& row) { return row.reason_text(); });
  columns.common_source = most_common([](const ComparisonRow& row) { return row.threshold_source; });
  columns.confidence_level = 1 - settings.run_alpha;
  tx.exec_params0(
      "UPDATE runs SET comparison_baseline_reason = $2, comparison_threshold_source = $3 WHERE id = $1",
      run_id, columns.common_reason, columns.common_source);
  for (const ComparisonRow& row : rows) columns.add(row);
  columns.insert(tx, run_id);
}

// `exclude_run`: a run left out of the history (the head, when it is stored).
std::map<std::string, common::CaseHistory> load_history(pqxx::work& tx, const std::vector<std::string>& names,
                                                        std::int64_t project_id, const std::string& gpu,
                                                        const std::string& branch, std::int64_t exclude_run) {
  std::map<std::string, common::CaseHistory> history;
  if (names.empty()) return history;
  // One hash lookup per row (30 runs x every case): each name has its entry
  // from the start, and map nodes do not move, so their keys serve as views.
  std::unordered_map<std::string_view, common::CaseHistory*> by_name;
  for (const std::string& name : names) {
    auto entry = history.try_emplace(name).first;
    by_name.emplace(entry->first, &entry->second);
  }
  auto append = [&](const pqxx::result& rows) {
    for (const auto& row : rows) {
      auto found = by_name.find(std::string_view(row[0].c_str(), row[0].size()));
      if (found == by_name.end()) continue;
      common::CaseHistory& h = *found->second;
      h.run_ids.push_back(number_of<std::int64_t>(row[1]));
      h.locations.push_back(number_of<double>(row[2]));
      h.replicate_counts.push_back(row[3].is_null() ? 0 : number_of<std::int64_t>(row[3]));
      h.replicate_sds.push_back(row[4].is_null() ? 0 : number_of<double>(row[4]));
      h.clocks.push_back(row[5].is_null()
                             ? common::RunClock{}
                             : common::RunClock{number_of<double>(row[5]), number_of<double>(row[6]),
                                                number_of<double>(row[7]), h.replicate_counts.back()});
    }
  };
  const int limit = static_cast<int>(kHistoryRuns);
  PgArray run_ids;
  pqxx::result recent = tx.exec_prepared("detection_recent_runs", project_id, gpu, branch, exclude_run, limit,
                                         common::kRuleVersion);
  for (const auto& row : recent) run_ids.number(row[0].as<std::int64_t>());
  append(tx.exec_prepared("detection_locations_in_runs", run_ids.str()));
  // Fewer runs than the limit: every run was read, so the histories are whole.
  if (recent.size() < kHistoryRuns) return history;
  PgArray short_of_runs;
  bool any = false;
  for (auto& [name, h] : history) {
    if (h.run_ids.size() >= kHistoryRuns) continue;
    short_of_runs.text(name);
    any = true;
    h = common::CaseHistory{};
  }
  if (any) {
    append(tx.exec_prepared("detection_locations_of_case", short_of_runs.str(), project_id, gpu, branch,
                            exclude_run, limit, common::kRuleVersion));
  }
  return history;
}

}  // namespace

std::vector<Statement> DetectionRepository::statements() {
  return {{"detection_baseline", kBaseline},
          {"detection_recent_runs", kRecentRuns},
          {"detection_locations_in_runs", kLocationsInRuns},
          {"detection_locations_of_case", kLocationsOfCase},
          {"detection_measurements", kMeasurementsOf},
          {"detection_insert", kInsertComparisons}};
}

namespace {

// A pull request compares with its base commit when that commit has a run
// on this GPU model; everything else with the newest run on the default
// branch. Cases whose base was measured in this job need neither.
std::map<std::string, Baseline> baselines_of(pqxx::work& tx, const std::vector<std::string>& names,
                                             const ProjectSettings& project, std::int64_t project_id,
                                             const std::string& gpu, const common::RunReport& report) {
  std::string default_reason = "newest run on " + project.default_branch + " on " + gpu;
  if (!report.base_commit)
    return find_baselines(tx, names, project_id, gpu, "branch", project.default_branch, default_reason);
  const std::string base = report.base_commit->substr(0, 12);
  std::map<std::string, Baseline> baselines = find_baselines(
      tx, names, project_id, gpu, "commit", *report.base_commit, "base_commit " + base + " on " + gpu);
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (!baselines.contains(name)) missing.push_back(name);
  }
  // The base commit's runs whose samples expired: said, then the default
  // branch's newest run that has them stands in.
  const auto expired = find_baselines(tx, missing, project_id, gpu, "commit", *report.base_commit, "", true);
  const std::string fallback_to = "newest run on " + project.default_branch + " with samples";
  default_reason = "base_commit " + base + " has no run of this case on " + gpu + "; " + fallback_to;
  auto fallback =
      find_baselines(tx, missing, project_id, gpu, "branch", project.default_branch, default_reason);
  for (auto& [name, b] : fallback) {
    if (auto gone = expired.find(name); gone != expired.end())
      b.reason = "base_commit " + base + "'s run " + std::to_string(gone->second.run_id) + " on " + gpu +
                 " has no samples left (expired: kw-server --keep-samples-days); " + fallback_to + " (run " +
                 std::to_string(b.run_id) + ", commit " + b.commit.substr(0, 12) + ")";
  }
  baselines.merge(fallback);
  return baselines;
}

// Each case by the threshold its head run was judged by, so compare and the
// run page agree.
std::map<std::string, std::pair<double, std::string>> judged_thresholds(pqxx::work& tx,
                                                                        std::int64_t head_run) {
  std::map<std::string, std::pair<double, std::string>> judged_by;
  for (const auto& row : tx.exec_params(
           "SELECT x.case_name, x.threshold, COALESCE(x.threshold_source, r.comparison_threshold_source, "
           "'') "
           "FROM comparisons x JOIN runs r ON r.id = x.run_id "
           "WHERE x.run_id = $1 AND x.impl = 'candidate' AND x.kind = 'time' AND x.threshold IS NOT NULL",
           head_run)) {
    std::string source = row[2].as<std::string>();
    judged_by[row[0].as<std::string>()] = {
        row[1].as<double>(), source.empty() ? "as run " + std::to_string(head_run) + " was judged" : source};
  }
  return judged_by;
}

}  // namespace

namespace {

// The fingerprints a pull request's identical-code claims are checked against.
std::optional<RunJudgingReads::BaseFingerprints> base_fingerprints(pqxx::work& tx, std::int64_t project_id,
                                                                   const std::string& gpu,
                                                                   const common::RunReport& report) {
  std::vector<std::string> claimed;
  for (const common::Case& c : report.cases)
    if (c.identical_to_base) claimed.push_back(c.name);
  if (claimed.empty() || !report.base_commit || project_id == 0) return std::nullopt;
  pqxx::result base = tx.exec_params(
      "SELECT id FROM runs WHERE project_id = $1 AND commit_sha = $2 AND gpu_model = $3 AND verdict <> "
      "'pending' ORDER BY id DESC LIMIT 1",
      project_id, *report.base_commit, gpu);
  if (base.empty()) return std::nullopt;
  RunJudgingReads::BaseFingerprints found{base[0][0].as<std::int64_t>(), {}};
  PgArray wanted;
  for (const std::string& name : claimed) wanted.text(name);
  for (const auto& row : tx.exec_params(
           "SELECT name, fingerprint->>'digest' FROM cases WHERE run_id = $1 AND name = ANY($2::text[]) "
           "AND fingerprint->>'digest' IS NOT NULL",
           found.run_id, wanted.str()))
    found.digests[row[0].as<std::string>()] = row[1].as<std::string>();
  return found;
}

}  // namespace

RunJudgingReads DetectionRepository::run_judging_reads(pqxx::work& tx, const std::string& project_name,
                                                       const common::RunReport& report) {
  RunJudgingReads reads;
  auto found = RunRepository::find_project(tx, project_name);
  if (found) reads.project = SettingsRepository::get(tx, *found);
  // Read before the run is stored: every run this transaction sees is earlier.
  constexpr std::int64_t kAfterEveryRun = INT64_MAX;
  const std::string gpu = report.device ? report.device->name : "none";
  std::vector<std::string> names;
  for (const common::Case& c : report.cases) {
    if (c.candidate()) names.push_back(c.name);
  }
  reads.baselines = baselines_of(tx, names, reads.project, reads.project.id, gpu, report);
  std::vector<std::int64_t> case_ids;
  case_ids.reserve(reads.baselines.size());
  for (const auto& [_, b] : reads.baselines) case_ids.push_back(b.case_id);
  reads.base_measurements = load_measurements(tx, case_ids);
  reads.history =
      load_history(tx, names, reads.project.id, gpu, reads.project.default_branch, kAfterEveryRun);
  reads.base_fingerprints = base_fingerprints(tx, reads.project.id, gpu, report);
  return reads;
}

std::string DetectionRepository::store_judgement(pqxx::work& tx, std::int64_t run_id,
                                                 const std::vector<ComparisonRow>& rows,
                                                 const common::DetectionSettings& settings,
                                                 const json& detection, const std::string& verdict) {
  insert_comparisons(tx, run_id, rows, settings);
  RunRepository::set_verdict(tx, run_id, verdict);
  tx.exec_params0("UPDATE runs SET detection = $2::jsonb WHERE id = $1", run_id, detection.dump());
  if (verdict == "regression" && carry_acknowledgement(tx, run_id)) return "pass";
  return verdict;
}

std::vector<CommitRuns> DetectionRepository::commit_runs(pqxx::work& tx, std::int64_t project_id,
                                                         const std::string& base, const std::string& head,
                                                         const std::string& gpu_model) {
  // The newest run of the head commit per GPU model, and of the base where
  // it has one; whether the head run measured the base in its own job.
  pqxx::result pairs = tx.exec_params(
      "SELECT h.gpu_model, h.id, b.id, h.base_commit IS NOT DISTINCT FROM $3 AND EXISTS ("
      "  SELECT 1 FROM measurements m JOIN cases c ON c.id = m.case_id WHERE c.run_id = h.id AND m.side = "
      "'base'), h.rule_version "
      "FROM (SELECT DISTINCT ON (gpu_model) gpu_model, id, base_commit, rule_version FROM runs "
      "      WHERE project_id = $1 AND commit_sha = $2 AND verdict <> 'pending' ORDER BY gpu_model, id DESC) "
      "h "
      "LEFT JOIN (SELECT DISTINCT ON (gpu_model) gpu_model, id FROM runs "
      "      WHERE project_id = $1 AND commit_sha = $3 AND verdict <> 'pending' ORDER BY gpu_model, id DESC) "
      "b "
      "  ON b.gpu_model = h.gpu_model "
      "WHERE $4 = '' OR h.gpu_model = $4 ORDER BY h.gpu_model",
      project_id, head, base, gpu_model);
  std::vector<CommitRuns> runs;
  for (const auto& pair : pairs) {
    CommitRuns r{pair[0].as<std::string>(), pair[1].as<std::int64_t>(), std::nullopt, pair[3].as<bool>(),
                 pair[4].as<int>()};
    if (!pair[2].is_null()) r.base_run = pair[2].as<std::int64_t>();
    runs.push_back(std::move(r));
  }
  return runs;
}

std::pair<std::vector<json>, json> DetectionRepository::judged_times(pqxx::work& tx, std::int64_t run_id,
                                                                     const std::string& name_like) {
  std::vector<json> rows;
  for (json& row : json::parse(RunRepository::run_comparisons_json(tx, run_id, 0, INT64_MAX, name_like))) {
    if (row["kind"] == "time") rows.push_back(std::move(row));
  }
  json detection = json::parse(
      tx.exec_params1("SELECT COALESCE(detection, '{}'::jsonb)::text FROM runs WHERE id = $1", run_id)[0]
          .as<std::string>());
  return {std::move(rows), std::move(detection)};
}

CrossRunReads DetectionRepository::cross_run_reads(pqxx::work& tx, const ProjectSettings& project,
                                                   const CommitRuns& runs, const std::string& name_like) {
  pqxx::result cases = tx.exec_params(
      "SELECT hc.name, hc.id, bc.id FROM cases hc JOIN cases bc ON bc.run_id = $2 AND bc.name = hc.name "
      "WHERE hc.run_id = $1 AND ($3 = '' OR hc.name ILIKE $3) ORDER BY hc.ordinal",
      runs.head_run, runs.base_run.value_or(0), name_like);
  std::vector<std::int64_t> ids;
  std::vector<std::string> names;
  for (const auto& c : cases) {
    names.push_back(c[0].as<std::string>());
    ids.push_back(c[1].as<std::int64_t>());
    ids.push_back(c[2].as<std::int64_t>());
  }
  auto measurements = load_measurements(tx, ids);
  CrossRunReads reads;
  for (const auto& c : cases) {
    reads.cases.push_back({c[0].as<std::string>(), std::move(measurements[c[1].as<std::int64_t>()]),
                           std::move(measurements[c[2].as<std::int64_t>()])});
  }
  reads.history = load_history(tx, names, project.id, runs.gpu, project.default_branch, runs.head_run);
  reads.judged_thresholds = judged_thresholds(tx, runs.head_run);
  return reads;
}

namespace {

using Flags = std::map<std::string, common::FlaggedRegression>;

// The candidate cases a run flagged as regressions, keyed "kind case".
Flags regressions_of(pqxx::work& tx, std::int64_t run_id) {
  Flags flags;
  for (const auto& row :
       tx.exec_params("SELECT kind || ' ' || case_name, ratio, upper, threshold FROM comparisons "
                      "WHERE run_id = $1 AND impl = 'candidate' AND status = 'regression'",
                      run_id)) {
    flags[row[0].as<std::string>()] = {row[1].as<double>(), row[2].as<double>(), row[3].as<double>()};
  }
  return flags;
}

// Runs of the same change as run $1 on its GPU model, the other way round
// from $2: 'from' finds acknowledged runs whose acknowledgement may reach
// it, 'to' the unacknowledged regressions that its acknowledgement may
// reach. The same change: the same tree, or a merge commit on the default
// branch and the pull request commit it merges (a parent measured off it).
constexpr const char* kSameChange = R"sql(
SELECT o.id FROM runs r
JOIN projects p ON p.id = r.project_id
JOIN runs o ON o.project_id = r.project_id AND o.gpu_model = r.gpu_model AND o.id <> r.id
WHERE r.id = $1 AND CASE WHEN $2 = 'from'
  THEN o.acknowledged_at IS NOT NULL AND (o.tree_sha = r.tree_sha OR (
         r.branch = p.default_branch AND o.branch <> p.default_branch AND o.commit_sha = ANY (r.parent_shas)))
  ELSE o.verdict = 'regression' AND o.acknowledged_at IS NULL AND (o.tree_sha = r.tree_sha OR (
         o.branch = p.default_branch AND r.branch <> p.default_branch AND r.commit_sha = ANY (o.parent_shas)))
  END
ORDER BY o.id DESC
)sql";

void carry(pqxx::work& tx, std::int64_t from, std::int64_t to) {
  tx.exec_params0(
      "UPDATE runs r SET verdict = 'pass', acknowledged_by = a.acknowledged_by, "
      "  acknowledged_reason = a.acknowledged_reason, acknowledged_at = now(), acknowledged_from = a.id "
      "FROM runs a WHERE r.id = $2 AND a.id = $1",
      from, to);
}

}  // namespace

std::optional<std::int64_t> DetectionRepository::carry_acknowledgement(pqxx::work& tx, std::int64_t run_id) {
  const Flags flagged = regressions_of(tx, run_id);
  for (const auto& source : tx.exec_params(kSameChange, run_id, "from")) {
    std::int64_t from = source[0].as<std::int64_t>();
    if (!common::acknowledgement_covers(regressions_of(tx, from), flagged)) continue;
    carry(tx, from, run_id);
    return from;
  }
  return std::nullopt;
}

std::optional<Acknowledged> DetectionRepository::acknowledge(pqxx::work& tx, std::int64_t run_id,
                                                             const std::string& who,
                                                             const std::string& reason) {
  pqxx::result rows = tx.exec_params("SELECT verdict FROM runs WHERE id = $1 FOR UPDATE", run_id);
  if (rows.empty()) return std::nullopt;
  Acknowledged result{rows[0][0].as<std::string>(), {}};
  if (result.previous_verdict != "regression") return result;
  tx.exec_params0(
      "UPDATE runs SET verdict = 'pass', acknowledged_by = $2, acknowledged_reason = $3, acknowledged_at = "
      "now() WHERE id = $1",
      run_id, who, reason);
  const Flags acknowledged = regressions_of(tx, run_id);
  for (const auto& target : tx.exec_params(kSameChange, run_id, "to")) {
    std::int64_t to = target[0].as<std::int64_t>();
    if (!common::acknowledgement_covers(acknowledged, regressions_of(tx, to))) continue;
    carry(tx, run_id, to);
    result.carried_to.push_back(to);
  }
  return result;
}

}  // namespace kw::server