#include "detection_repository.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <future>
#include <regex>
#include <thread>
#include <unordered_map>

#include "errors.hpp"
#include "pg_array.hpp"
#include "run_repository.hpp"

namespace kw::server {

namespace {

using common::ChangeStatus;
using common::Comparison;
using common::Measurement;
using nlohmann::json;

constexpr std::size_t kHistoryRuns = 30;

// The newest completed run of each named case on this GPU model, at a given
// commit ($4 = 'commit') or on a branch ($4 = 'branch'); $5 names which.
constexpr const char* kBaseline = R"sql(
SELECT w.name, b.run_id, b.commit_sha, b.case_id
FROM unnest($1::text[]) AS w(name)
CROSS JOIN LATERAL (
  SELECT r.id AS run_id, r.commit_sha, c.id AS case_id
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3
    AND r.verdict IN ('pass', 'improvement', 'regression')
    AND CASE WHEN $4 = 'commit' THEN r.commit_sha = $5 ELSE r.branch = $5 END
  ORDER BY c.run_id DESC
  LIMIT 1) AS b
)sql";

// A case's history: its candidate's per-run location over its newest
// completed runs on the default branch on this GPU model, oldest first.
// Nearly every run measures the same cases, so the history is first read from
// the newest runs as a whole (one index scan on runs, then their one row each
// in run_locations); only a case missing from some of them is looked up on its
// own.
constexpr const char* kRecentRuns = R"sql(
SELECT id FROM runs
WHERE project_id = $1 AND gpu_model = $2 AND branch = $3 AND id <> $4
  AND verdict IN ('pass', 'improvement', 'regression')
ORDER BY id DESC
LIMIT $5
)sql";

// Every case of those runs: filtering by name here costs more than in the caller.
constexpr const char* kLocationsInRuns = R"sql(
SELECT u.name, l.run_id, u.location
FROM run_locations l, unnest(l.case_names, l.locations) AS u(name, location)
WHERE l.run_id = ANY($1::bigint[])
ORDER BY l.run_id
)sql";

constexpr const char* kLocationsOfCase = R"sql(
SELECT w.name, h.run_id, h.location
FROM unnest($1::text[]) AS w(name)
CROSS JOIN LATERAL (
  SELECT c.run_id, c.candidate_location_ns AS location
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3 AND r.branch = $4 AND r.id <> $5
    AND r.verdict IN ('pass', 'improvement', 'regression') AND c.candidate_location_ns IS NOT NULL
  ORDER BY c.run_id DESC
  LIMIT $6) AS h
ORDER BY w.name, h.run_id
)sql";

constexpr const char* kMeasurementsOf = R"sql(
SELECT case_id, impl, samples_ns::text, throttled_samples::text
FROM measurements
WHERE case_id = ANY($1::bigint[])
)sql";

// Comparisons as parallel arrays, one element per row: one round trip, and
// far cheaper to build and parse than one JSON object per row.
constexpr const char* kInsertComparisons = R"sql(
INSERT INTO comparisons (run_id, case_name, kind, impl, baseline_run_id, baseline_reason, status, ratio,
                         ratio_of_medians, lower, upper, confidence, p_value, threshold, head_noise, base_noise,
                         head_samples, base_samples, excluded_throttled, note)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::float8[],
                         $9::float8[], $10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::float8[],
                         $15::float8[], $16::float8[], $17::integer[], $18::integer[], $19::integer[], $20::text[])
)sql";

struct Baseline {
  std::int64_t run_id = 0;
  std::string commit;
  std::int64_t case_id = 0;
  std::string reason;
};

// `match`: "commit" or "branch", `key` the commit or branch name.
std::map<std::string, Baseline> find_baselines(pqxx::work& tx, const std::vector<std::string>& names,
                                               std::int64_t project_id, const std::string& gpu,
                                               const std::string& match, const std::string& key,
                                               const std::string& reason) {
  std::map<std::string, Baseline> found;
  if (names.empty()) return found;
  PgArray wanted;
  for (const std::string& name : names) wanted.text(name);
  for (const auto& row : tx.exec_prepared("detection_baseline", wanted.str(), project_id, gpu, match, key)) {
    Baseline b{row[1].as<std::int64_t>(), row[2].as<std::string>(), row[3].as<std::int64_t>(), ""};
    b.reason = reason + " (run " + std::to_string(b.run_id) + ", commit " + b.commit.substr(0, 12) + ")";
    found[row[0].as<std::string>()] = b;
  }
  return found;
}

// Parses PostgreSQL's text form of a numeric array, "{1.5,2,3e+06}".
template <typename T>
std::vector<T> parse_pg_array(std::string_view text) {
  std::vector<T> values;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') {
    throw std::runtime_error("unexpected array text from PostgreSQL: " + std::string(text.substr(0, 40)));
  }
  const char* p = text.data() + 1;
  const char* end = text.data() + text.size() - 1;
  while (p < end) {
    T value{};
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc()) throw std::runtime_error("bad number in array text from PostgreSQL");
    values.push_back(value);
    p = next < end && *next == ',' ? next + 1 : next;
  }
  return values;
}

// A number in PostgreSQL's text form (libpqxx 6 parses doubles through a
// stream, several times slower, and history reads thousands).
template <typename T>
T number_of(const pqxx::field& field) {
  T value{};
  const char* end = field.c_str() + field.size();
  auto [next, ec] = std::from_chars(field.c_str(), end, value);
  if (ec != std::errc() || next != end)
    throw std::runtime_error("unexpected number from PostgreSQL: " + std::string(field.c_str()));
  return value;
}

std::map<std::int64_t, std::vector<Measurement>> load_measurements(
    pqxx::work& tx, const std::vector<std::int64_t>& case_ids) {
  std::map<std::int64_t, std::vector<Measurement>> by_case;
  if (case_ids.empty()) return by_case;
  PgArray ids;
  for (std::int64_t id : case_ids) ids.number(id);
  for (const auto& row : tx.exec_prepared("detection_measurements", ids.str())) {
    Measurement m;
    m.impl = row[1].as<std::string>();
    m.samples_ns = parse_pg_array<double>(row[2].c_str());
    m.throttled_samples = parse_pg_array<std::int64_t>(row[3].c_str());
    by_case[row[0].as<std::int64_t>()].push_back(std::move(m));
  }
  return by_case;
}

const Measurement* find_impl(const std::vector<Measurement>& measurements, const std::string& impl) {
  for (const Measurement& m : measurements) {
    if (m.impl == impl) return &m;
  }
  return nullptr;
}

common::Timing timing_of(const Measurement& m) {
  return {m.samples_ns, m.throttled_samples};
}

struct ComparisonRow {
  std::string case_name;
  std::string kind;  // "time" or "speedup"
  std::string impl;
  const Baseline* baseline = nullptr;
  Comparison comparison;

  json to_json() const {
    const Comparison& c = comparison;
    json row{{"case", case_name},
             {"kind", kind},
             {"impl", impl},
             {"baseline_run_id", baseline ? json(baseline->run_id) : json(nullptr)},
             {"baseline_reason", baseline ? baseline->reason : ""},
             {"status", common::to_string(c.status)},
             {"excluded_throttled", c.excluded_throttled},
             {"note", c.note}};
    if (c.status != ChangeStatus::no_baseline) {
      row.update({{"ratio", c.ratio},
                  {"ratio_of_medians", c.ratio_of_medians},
                  {"lower", c.lower},
                  {"upper", c.upper},
                  {"confidence", c.confidence},
                  {"p_value", c.p_value},
                  {"threshold", c.threshold},
                  {"head_noise", c.head_noise},
                  {"base_noise", c.base_noise},
                  {"head_samples", c.head_samples},
                  {"base_samples", c.base_samples}});
    }
    return row;
  }
};

void insert_comparisons(pqxx::work& tx, std::int64_t run_id, const std::vector<ComparisonRow>& rows) {
  if (rows.empty()) return;
  PgArray case_name, kind, impl, baseline_run, reason, status, ratio, ratio_of_medians, lower, upper,
      confidence, p_value, threshold, head_noise, base_noise, head_samples, base_samples, excluded, note;
  for (const ComparisonRow& row : rows) {
    const Comparison& c = row.comparison;
    case_name.text(row.case_name);
    kind.text(row.kind);
    impl.text(row.impl);
    if (row.baseline) {
      baseline_run.number(row.baseline->run_id);
    } else {
      baseline_run.null();
    }
    reason.text(row.baseline ? row.baseline->reason : "");
    status.text(common::to_string(c.status));
    bool measured = c.status != ChangeStatus::no_baseline;
    for (auto [array, value] : {std::pair{&ratio, c.ratio},
                                {&ratio_of_medians, c.ratio_of_medians},
                                {&lower, c.lower},
                                {&upper, c.upper},
                                {&confidence, c.confidence},
                                {&p_value, c.p_value},
                                {&threshold, c.threshold},
                                {&head_noise, c.head_noise},
                                {&base_noise, c.base_noise}}) {
      if (measured) {
        array->number(value);
      } else {
        array->null();
      }
    }
    if (measured) {
      head_samples.number(c.head_samples);
      base_samples.number(c.base_samples);
    } else {
      head_samples.null();
      base_samples.null();
    }
    excluded.number(c.excluded_throttled);
    note.text(c.note);
  }
  tx.exec_prepared0("detection_insert", run_id, case_name.str(), kind.str(), impl.str(), baseline_run.str(),
                    reason.str(), status.str(), ratio.str(), ratio_of_medians.str(), lower.str(), upper.str(),
                    confidence.str(), p_value.str(), threshold.str(), head_noise.str(), base_noise.str(),
                    head_samples.str(), base_samples.str(), excluded.str(), note.str());
}

struct CaseResult {
  ChangeStatus status = ChangeStatus::no_baseline;
  std::vector<ComparisonRow> rows;
};

// One case: the time of every implementation present in both runs, and the
// in-run speedup over each baseline implementation. The case regressed when
// the candidate's time did and, where it has in-run baselines, its speedup
// over at least one of them dropped too (otherwise the machine slowed, not
// the kernel).
// One case's recent history: run ids and candidate locations, oldest first.
struct History {
  std::vector<std::int64_t> run_ids;
  std::vector<double> locations;

  // The locations of runs up to and including `run_id` (the baseline): what
  // the candidate's level is forecast from.
  std::vector<double> through(std::int64_t run_id) const {
    std::vector<double> out;
    for (std::size_t i = 0; i < run_ids.size(); ++i) {
      if (run_ids[i] <= run_id) out.push_back(locations[i]);
    }
    return out;
  }
};

// `threshold` (noise-aware, from the whole history) is for the baseline
// implementations and speedups; the candidate's time is decided against the
// history up to its baseline run.
CaseResult compare_case(const std::string& name, const std::vector<Measurement>& head,
                        const std::vector<Measurement>& base, const Baseline* baseline,
                        const History& history, double min_threshold, double threshold,
                        const common::DetectionSettings& settings) {
  CaseResult result;
  const Measurement* head_candidate = find_impl(head, "candidate");
  const Measurement* base_candidate = find_impl(base, "candidate");
  if (!head_candidate) return result;
  if (!baseline || !base_candidate) {
    Comparison none;
    none.note = baseline ? "the baseline run has no candidate measurement for this case" : "no baseline run";
    result.rows.push_back({name, "time", "candidate", baseline, none});
    return result;
  }
  Comparison time =
      common::compare_times_with_history(timing_of(*head_candidate), timing_of(*base_candidate),
                                         history.through(baseline->run_id), min_threshold, settings);
  result.rows.push_back({name, "time", "candidate", baseline, time});
  bool speedup_worse = false, speedup_better = false, any_speedup = false;
  for (const Measurement& m : head) {
    if (m.is_candidate()) continue;
    const Measurement* base_impl = find_impl(base, m.impl);
    if (!base_impl) continue;
    Comparison impl_time = common::compare_times(timing_of(m), timing_of(*base_impl), threshold, settings);
    result.rows.push_back({name, "time", m.impl, baseline, impl_time});
    Comparison speedup =
        common::compare_speedups(timing_of(*head_candidate), timing_of(m), timing_of(*base_candidate),
                                 timing_of(*base_impl), threshold, settings);
    result.rows.push_back({name, "speedup", m.impl, baseline, speedup});
    any_speedup = true;
    speedup_worse = speedup_worse || speedup.status == ChangeStatus::regression;
    speedup_better = speedup_better || speedup.status == ChangeStatus::improvement;
  }
  result.status = ChangeStatus::unchanged;
  if (time.status == ChangeStatus::regression && (!any_speedup || speedup_worse)) {
    result.status = ChangeStatus::regression;
  } else if (time.status == ChangeStatus::improvement && (!any_speedup || speedup_better)) {
    result.status = ChangeStatus::improvement;
  } else if (time.status != ChangeStatus::unchanged) {
    std::string& note = result.rows[0].comparison.note;
    note += (note.empty() ? "" : "; ") +
            std::string("not flagged: the in-run baselines moved alike (machine drift, not the kernel)");
  }
  return result;
}

// `exclude_run`: a run left out of the history (the head, when it is stored).
std::map<std::string, History> load_history(pqxx::work& tx, const std::vector<std::string>& names,
                                            std::int64_t project_id, const std::string& gpu,
                                            const std::string& branch, std::int64_t exclude_run) {
  std::map<std::string, History> history;
  if (names.empty()) return history;
  // One hash lookup per row (30 runs x every case): each name has its entry
  // from the start, and map nodes do not move, so their keys serve as views.
  std::unordered_map<std::string_view, History*> by_name;
  for (const std::string& name : names) {
    auto entry = history.try_emplace(name).first;
    by_name.emplace(entry->first, &entry->second);
  }
  auto append = [&](const pqxx::result& rows) {
    for (const auto& row : rows) {
      auto found = by_name.find(std::string_view(row[0].c_str(), row[0].size()));
      if (found == by_name.end()) continue;
      found->second->run_ids.push_back(number_of<std::int64_t>(row[1]));
      found->second->locations.push_back(number_of<double>(row[2]));
    }
  };
  const int limit = static_cast<int>(kHistoryRuns);
  PgArray run_ids;
  pqxx::result recent =
      tx.exec_prepared("detection_recent_runs", project_id, gpu, branch, exclude_run, limit);
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
    h = History{};
  }
  if (any) {
    append(tx.exec_prepared("detection_locations_of_case", short_of_runs.str(), project_id, gpu, branch,
                            exclude_run, limit));
  }
  return history;
}

}  // namespace

double ProjectSettings::min_threshold_for(const std::string& case_name) const {
  auto it = case_thresholds.find(case_name);
  return it == case_thresholds.end() ? min_threshold : it->second;
}

json ProjectSettings::to_json() const {
  return {{"name", name},
          {"default_branch", default_branch},
          {"min_threshold", min_threshold},
          {"case_thresholds", case_thresholds},
          {"history_z", history_z},
          {"github_repo", github_repo.empty() ? json(nullptr) : json(github_repo)},
          {"webhook_url", webhook_url.empty() ? json(nullptr) : json(webhook_url)}};
}

common::DetectionSettings DetectionRepository::detection_settings(const ProjectSettings& project) {
  common::DetectionSettings settings;
  settings.history_z = project.history_z;
  return settings;
}

std::vector<Statement> DetectionRepository::statements() {
  return {{"detection_baseline", kBaseline},
          {"detection_recent_runs", kRecentRuns},
          {"detection_locations_in_runs", kLocationsInRuns},
          {"detection_locations_of_case", kLocationsOfCase},
          {"detection_measurements", kMeasurementsOf},
          {"detection_insert", kInsertComparisons},
          {"detection_case_status",
           "UPDATE cases c SET status = s.status FROM unnest($2::text[], $3::text[]) AS s(name, status) "
           "WHERE c.run_id = $1 AND c.name = s.name"}};
}

ProjectSettings DetectionRepository::settings(pqxx::work& tx, std::int64_t project_id) {
  pqxx::row row = tx.exec_params1(
      "SELECT name, default_branch, min_threshold, COALESCE(github_repo, ''), COALESCE(webhook_url, ''), "
      "history_z FROM projects WHERE id = $1",
      project_id);
  ProjectSettings settings{
      project_id, row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<double>(),
      {},         row[5].as<double>(),      row[3].as<std::string>(), row[4].as<std::string>()};
  for (const auto& c : tx.exec_params(
           "SELECT case_name, min_threshold FROM case_settings WHERE project_id = $1", project_id)) {
    settings.case_thresholds[c[0].as<std::string>()] = c[1].as<double>();
  }
  return settings;
}

ProjectSettings DetectionRepository::update_settings(pqxx::work& tx, std::int64_t project_id,
                                                     const json& changes) {
  if (!changes.is_object()) throw Unprocessable("settings: must be a JSON object");
  auto threshold_of = [](const json& value, const std::string& path) {
    if (!value.is_number()) throw Unprocessable(path + ": must be a number");
    double threshold = value.get<double>();
    if (!(threshold > 0 && threshold < 1))
      throw Unprocessable(path + ": must be between 0 and 1 (0.02 = 2%)");
    return threshold;
  };
  for (const auto& [key, value] : changes.items()) {
    if (key == "default_branch") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        throw Unprocessable("default_branch: must be a non-empty string");
      }
      tx.exec_params0("UPDATE projects SET default_branch = $2 WHERE id = $1", project_id,
                      value.get<std::string>());
    } else if (key == "min_threshold") {
      tx.exec_params0("UPDATE projects SET min_threshold = $2 WHERE id = $1", project_id,
                      threshold_of(value, "min_threshold"));
    } else if (key == "history_z") {
      if (!value.is_number() || !(value.get<double>() >= 1 && value.get<double>() <= 20))
        throw Unprocessable("history_z: must be a number from 1 to 20 (robust forecast errors; default 3.5)");
      tx.exec_params0("UPDATE projects SET history_z = $2 WHERE id = $1", project_id, value.get<double>());
    } else if (key == "case_thresholds") {
      if (!value.is_object())
        throw Unprocessable("case_thresholds: must be an object of case name -> number|null");
      for (const auto& [case_name, threshold] : value.items()) {
        if (threshold.is_null()) {
          tx.exec_params0("DELETE FROM case_settings WHERE project_id = $1 AND case_name = $2", project_id,
                          case_name);
        } else {
          tx.exec_params0(
              "INSERT INTO case_settings (project_id, case_name, min_threshold) VALUES ($1, $2, $3) "
              "ON CONFLICT (project_id, case_name) DO UPDATE SET min_threshold = EXCLUDED.min_threshold",
              project_id, case_name, threshold_of(threshold, "case_thresholds." + case_name));
        }
      }
    } else if (key == "github_repo") {
      if (!value.is_null() &&
          !(value.is_string() &&
            std::regex_match(value.get<std::string>(), std::regex("[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")))) {
        throw Unprocessable("github_repo: must be \"owner/name\" or null");
      }
      tx.exec_params0("UPDATE projects SET github_repo = $2 WHERE id = $1", project_id,
                      value.is_null() ? nullptr : value.get<std::string>().c_str());
    } else if (key == "webhook_url") {
      if (!value.is_null() && !(value.is_string() && (value.get<std::string>().rfind("http://", 0) == 0 ||
                                                      value.get<std::string>().rfind("https://", 0) == 0))) {
        throw Unprocessable("webhook_url: must be an http:// or https:// URL or null");
      }
      tx.exec_params0("UPDATE projects SET webhook_url = $2 WHERE id = $1", project_id,
                      value.is_null() ? nullptr : value.get<std::string>().c_str());
    } else {
      throw Unprocessable(key +
                          ": unknown setting (default_branch, min_threshold, case_thresholds, history_z, "
                          "github_repo, webhook_url)");
    }
  }
  return settings(tx, project_id);
}

struct DetectionRepository::Plan {
  std::map<std::string, Baseline> baselines;  // the rows point into it
  std::vector<ComparisonRow> rows;
  bool regression = false;
  bool improvement = false;
};

std::shared_ptr<const DetectionRepository::Plan> DetectionRepository::plan(pqxx::work& tx,
                                                                           const std::string& project_name,
                                                                           const common::RunReport& report) {
  auto result = std::make_shared<Plan>();
  auto found = RunRepository::find_project(tx, project_name);
  // Planned before the run is stored: every run this transaction sees is earlier.
  constexpr std::int64_t kAfterEveryRun = INT64_MAX;
  ProjectSettings project = found ? settings(tx, *found) : ProjectSettings{};
  std::int64_t project_id = found.value_or(0);
  common::DetectionSettings detection = detection_settings(project);
  std::string gpu = report.device ? report.device->name : "none";

  std::vector<std::string> names;
  for (const common::Case& c : report.cases) {
    if (c.candidate()) names.push_back(c.name);
  }
  // A pull request compares with its base commit when that commit has a run
  // on this GPU model; everything else with the newest run on the default branch.
  std::map<std::string, Baseline>& baselines = result->baselines;
  std::string default_reason = "newest run on " + project.default_branch + " on " + gpu;
  if (report.base_commit) {
    baselines = find_baselines(tx, names, project_id, gpu, "commit", *report.base_commit,
                               "base_commit " + report.base_commit->substr(0, 12) + " on " + gpu);
    std::vector<std::string> missing;
    for (const std::string& name : names) {
      if (!baselines.contains(name)) missing.push_back(name);
    }
    default_reason = "base_commit " + report.base_commit->substr(0, 12) + " has no run of this case on " +
                     gpu + "; newest run on " + project.default_branch;
    auto fallback =
        find_baselines(tx, missing, project_id, gpu, "branch", project.default_branch, default_reason);
    baselines.merge(fallback);
  } else {
    baselines = find_baselines(tx, names, project_id, gpu, "branch", project.default_branch, default_reason);
  }
  std::vector<std::int64_t> case_ids;
  case_ids.reserve(baselines.size());
  for (const auto& [_, b] : baselines) case_ids.push_back(b.case_id);
  auto base_measurements = load_measurements(tx, case_ids);
  auto history = load_history(tx, names, project_id, gpu, project.default_branch, kAfterEveryRun);

  // Cases are independent: compare them on every core (the statistics are
  // the bulk of a large run's detection time).
  std::vector<const common::Case*> measured;
  for (const common::Case& c : report.cases) {
    if (c.candidate()) measured.push_back(&c);
  }
  static const std::vector<Measurement> kNone;
  static const History kNoHistory;
  auto compare_range = [&](std::size_t begin, std::size_t end) {
    std::vector<CaseResult> results;
    for (std::size_t i = begin; i < end; ++i) {
      const common::Case& c = *measured[i];
      auto b = baselines.find(c.name);
      const Baseline* baseline = b == baselines.end() ? nullptr : &b->second;
      auto measurements = baseline ? base_measurements.find(baseline->case_id) : base_measurements.end();
      const std::vector<Measurement>& base =
          measurements == base_measurements.end() ? kNone : measurements->second;
      auto h = history.find(c.name);
      const History& case_history = h == history.end() ? kNoHistory : h->second;
      double min_threshold = project.min_threshold_for(c.name);
      double threshold = common::noise_aware_threshold(case_history.locations, min_threshold, detection);
      results.push_back(compare_case(c.name, c.measurements, base, baseline, case_history, min_threshold,
                                     threshold, detection));
    }
    return results;
  };
  std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  workers = std::min(workers, std::max<std::size_t>(1, measured.size() / 16));
  std::vector<std::future<std::vector<CaseResult>>> parts;
  for (std::size_t w = 0; w < workers; ++w) {
    std::size_t begin = measured.size() * w / workers, end = measured.size() * (w + 1) / workers;
    parts.push_back(
        std::async(w == 0 ? std::launch::deferred : std::launch::async, compare_range, begin, end));
  }
  for (auto& part : parts) {
    for (CaseResult& case_result : part.get()) {
      result->regression = result->regression || case_result.status == ChangeStatus::regression;
      result->improvement = result->improvement || case_result.status == ChangeStatus::improvement;
      for (ComparisonRow& row : case_result.rows) result->rows.push_back(std::move(row));
    }
  }
  return result;
}

std::string DetectionRepository::finish(pqxx::work& tx, std::int64_t run_id, const Plan& plan,
                                        const common::RunReport& report) {
  insert_comparisons(tx, run_id, plan.rows);
  PgArray names, statuses;
  for (const ComparisonRow& row : plan.rows) {
    if (row.kind != "time" || row.impl != "candidate") continue;
    names.text(row.case_name);
    statuses.text(common::to_string(row.comparison.status));
  }
  tx.exec_prepared0("detection_case_status", run_id, names.str(), statuses.str());
  bool failed = false;
  for (const common::Stage& stage : report.stages)
    failed = failed || stage.status == common::StageStatus::failed;
  for (const common::Case& c : report.cases) failed = failed || (c.correctness && !c.correctness->passed);
  std::string verdict = failed             ? "failed"
                        : plan.regression  ? "regression"
                        : plan.improvement ? "improvement"
                                           : "pass";
  RunRepository::set_verdict(tx, run_id, verdict);
  return verdict;
}

json DetectionRepository::compare_commits(pqxx::work& tx, std::int64_t project_id, const std::string& base,
                                          const std::string& head, const std::string& gpu_model) {
  ProjectSettings project = settings(tx, project_id);
  common::DetectionSettings detection = detection_settings(project);
  // The newest run of each commit per GPU model.
  pqxx::result pairs = tx.exec_params(
      "SELECT h.gpu_model, h.id, b.id FROM "
      "  (SELECT DISTINCT ON (gpu_model) gpu_model, id FROM runs "
      "   WHERE project_id = $1 AND commit_sha = $2 AND verdict <> 'pending' ORDER BY gpu_model, id DESC) h "
      "JOIN (SELECT DISTINCT ON (gpu_model) gpu_model, id FROM runs "
      "   WHERE project_id = $1 AND commit_sha = $3 AND verdict <> 'pending' ORDER BY gpu_model, id DESC) b "
      "  ON b.gpu_model = h.gpu_model "
      "WHERE $4 = '' OR h.gpu_model = $4 ORDER BY h.gpu_model",
      project_id, head, base, gpu_model);
  json gpus = json::array();
  for (const auto& pair : pairs) {
    std::string gpu = pair[0].as<std::string>();
    std::int64_t head_run = pair[1].as<std::int64_t>(), base_run = pair[2].as<std::int64_t>();
    pqxx::result cases = tx.exec_params(
        "SELECT hc.name, hc.id, bc.id FROM cases hc JOIN cases bc ON bc.run_id = $2 AND bc.name = hc.name "
        "WHERE hc.run_id = $1 ORDER BY hc.ordinal",
        head_run, base_run);
    std::vector<std::int64_t> ids;
    std::vector<std::string> names;
    for (const auto& c : cases) {
      names.push_back(c[0].as<std::string>());
      ids.push_back(c[1].as<std::int64_t>());
      ids.push_back(c[2].as<std::int64_t>());
    }
    auto measurements = load_measurements(tx, ids);
    auto history = load_history(tx, names, project_id, gpu, project.default_branch, head_run);
    Baseline baseline{
        base_run, base, 0,
        "commit " + base.substr(0, 12) + " on " + gpu + " (run " + std::to_string(base_run) + ")"};
    json rows = json::array();
    for (const auto& c : cases) {
      std::string name = c[0].as<std::string>();
      double min_threshold = project.min_threshold_for(name);
      const History& case_history = history[name];
      double threshold = common::noise_aware_threshold(case_history.locations, min_threshold, detection);
      CaseResult result =
          compare_case(name, measurements[c[1].as<std::int64_t>()], measurements[c[2].as<std::int64_t>()],
                       &baseline, case_history, min_threshold, threshold, detection);
      if (result.rows.empty()) continue;
      json row = result.rows[0].to_json();
      row["status"] = common::to_string(result.status);
      row["comparisons"] = json::array();
      for (const ComparisonRow& comparison : result.rows) row["comparisons"].push_back(comparison.to_json());
      for (const char* drop : {"kind", "impl", "baseline_run_id", "baseline_reason"}) row.erase(drop);
      rows.push_back(std::move(row));
    }
    std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
      auto effect = [](const json& row) {
        return row.contains("ratio") ? std::abs(std::log(row["ratio"].get<double>())) : 0.0;
      };
      return effect(a) > effect(b);
    });
    gpus.push_back(
        {{"gpu_model", gpu}, {"head_run_id", head_run}, {"base_run_id", base_run}, {"cases", rows}});
  }
  return {{"project", project.name}, {"base", base}, {"head", head}, {"gpus", gpus}};
}

std::optional<std::string> DetectionRepository::acknowledge(pqxx::work& tx, std::int64_t run_id,
                                                            const std::string& who,
                                                            const std::string& reason) {
  pqxx::result rows = tx.exec_params("SELECT verdict FROM runs WHERE id = $1 FOR UPDATE", run_id);
  if (rows.empty()) return std::nullopt;
  std::string verdict = rows[0][0].as<std::string>();
  if (verdict == "regression") {
    tx.exec_params0(
        "UPDATE runs SET verdict = 'pass', acknowledged_by = $2, acknowledged_reason = $3, acknowledged_at = "
        "now() "
        "WHERE id = $1",
        run_id, who, reason);
  }
  return verdict;
}

}  // namespace kw::server
