#include "detection_repository.hpp"

#include <algorithm>
#include <cmath>

#include "errors.hpp"
#include "run_repository.hpp"

namespace kw::server {

namespace {

using nlohmann::json;
using common::ChangeStatus;
using common::Comparison;
using common::Measurement;

constexpr std::size_t kHistoryRuns = 30;

// The newest completed run of each named case on this GPU model, either at a
// given commit or on a branch before this run.
constexpr const char* kBaselineAtCommit = R"sql(
SELECT w.name, b.run_id, b.commit_sha, b.case_id
FROM jsonb_array_elements_text($1::jsonb) AS w(name)
CROSS JOIN LATERAL (
  SELECT r.id AS run_id, r.commit_sha, c.id AS case_id
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3 AND r.id <> $4
    AND r.verdict IN ('pass', 'improvement', 'regression') AND r.commit_sha = $5
  ORDER BY c.run_id DESC
  LIMIT 1) AS b
)sql";

constexpr const char* kBaselineOnBranch = R"sql(
SELECT w.name, b.run_id, b.commit_sha, b.case_id
FROM jsonb_array_elements_text($1::jsonb) AS w(name)
CROSS JOIN LATERAL (
  SELECT r.id AS run_id, r.commit_sha, c.id AS case_id
  FROM cases c JOIN runs r ON r.id = c.run_id
  WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3 AND r.id < $4
    AND r.verdict IN ('pass', 'improvement', 'regression') AND r.branch = $5
  ORDER BY c.run_id DESC
  LIMIT 1) AS b
)sql";

// The candidate's per-run location over the case's recent history on the
// default branch, oldest first.
constexpr const char* kHistory = R"sql(
SELECT w.name, COALESCE((
  SELECT json_agg(h.location ORDER BY h.run_id) FROM (
    SELECT c.run_id, c.candidate_location_ns AS location
    FROM cases c JOIN runs r ON r.id = c.run_id
    WHERE c.project_id = $2 AND c.name = w.name AND r.gpu_model = $3 AND r.branch = $4 AND r.id <> $5
      AND r.verdict IN ('pass', 'improvement', 'regression') AND c.candidate_location_ns IS NOT NULL
    ORDER BY c.run_id DESC
    LIMIT $6) AS h), '[]')::text
FROM jsonb_array_elements_text($1::jsonb) AS w(name)
)sql";

constexpr const char* kMeasurementsOf = R"sql(
SELECT case_id, impl, array_to_json(samples_ns)::text, array_to_json(throttled_samples)::text
FROM measurements
WHERE case_id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)
)sql";

constexpr const char* kInsertComparisons = R"sql(
INSERT INTO comparisons (run_id, case_name, kind, impl, baseline_run_id, baseline_reason, status, ratio,
                         ratio_of_medians, lower, upper, confidence, p_value, threshold, head_noise, base_noise,
                         head_samples, base_samples, excluded_throttled, note)
SELECT $1, x.case_name, x.kind, x.impl, x.baseline_run_id, x.baseline_reason, x.status, x.ratio,
       x.ratio_of_medians, x.lower, x.upper, x.confidence, x.p_value, x.threshold, x.head_noise, x.base_noise,
       x.head_samples, x.base_samples, x.excluded_throttled, x.note
FROM jsonb_to_recordset($2::jsonb) AS x(
  case_name text, kind text, impl text, baseline_run_id bigint, baseline_reason text, status text,
  ratio float8, ratio_of_medians float8, lower float8, upper float8, confidence float8, p_value float8,
  threshold float8, head_noise float8, base_noise float8, head_samples int, base_samples int,
  excluded_throttled int, note text)
)sql";

struct Baseline {
  std::int64_t run_id = 0;
  std::string commit;
  std::int64_t case_id = 0;
  std::string reason;
};

json names_json(const std::vector<std::string>& names) { return json(names); }

std::map<std::string, Baseline> find_baselines(pqxx::work& tx, const char* statement,
                                                const std::vector<std::string>& names, std::int64_t project_id,
                                                const std::string& gpu, std::int64_t run_id, const std::string& key,
                                                const std::string& reason) {
  std::map<std::string, Baseline> found;
  if (names.empty()) return found;
  for (const auto& row : tx.exec_prepared(statement, names_json(names).dump(), project_id, gpu, run_id, key)) {
    Baseline b{row[1].as<std::int64_t>(), row[2].as<std::string>(), row[3].as<std::int64_t>(), ""};
    b.reason = reason + " (run " + std::to_string(b.run_id) + ", commit " + b.commit.substr(0, 12) + ")";
    found[row[0].as<std::string>()] = b;
  }
  return found;
}

std::map<std::int64_t, std::vector<Measurement>> load_measurements(pqxx::work& tx,
                                                                   const std::vector<std::int64_t>& case_ids) {
  std::map<std::int64_t, std::vector<Measurement>> by_case;
  if (case_ids.empty()) return by_case;
  for (const auto& row : tx.exec_prepared("detection_measurements", json(case_ids).dump())) {
    Measurement m;
    m.impl = row[1].as<std::string>();
    m.samples_ns = json::parse(row[2].c_str()).get<std::vector<double>>();
    m.throttled_samples = json::parse(row[3].c_str()).get<std::vector<std::int64_t>>();
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

common::Timing timing_of(const Measurement& m) { return {m.samples_ns, m.throttled_samples}; }

json comparison_row(const std::string& case_name, const char* kind, const std::string& impl,
                    const Baseline* baseline, const std::string& reason, const Comparison& c) {
  json row{{"case_name", case_name},
           {"kind", kind},
           {"impl", impl},
           {"baseline_run_id", baseline ? json(baseline->run_id) : json(nullptr)},
           {"baseline_reason", reason},
           {"status", common::to_string(c.status)},
           {"excluded_throttled", c.excluded_throttled},
           {"note", c.note}};
  if (c.status != ChangeStatus::no_baseline) {
    row.update({{"ratio", c.ratio},           {"ratio_of_medians", c.ratio_of_medians},
                {"lower", c.lower},           {"upper", c.upper},
                {"confidence", c.confidence}, {"p_value", c.p_value},
                {"threshold", c.threshold},   {"head_noise", c.head_noise},
                {"base_noise", c.base_noise}, {"head_samples", c.head_samples},
                {"base_samples", c.base_samples}});
  }
  return row;
}

struct CaseResult {
  ChangeStatus status = ChangeStatus::no_baseline;
  json rows = json::array();
};

// One case: the time of every implementation present in both runs, and the
// in-run speedup over each baseline implementation. The case regressed when
// the candidate's time did and, where it has in-run baselines, its speedup
// over at least one of them dropped too (otherwise the machine slowed, not
// the kernel).
CaseResult compare_case(const std::string& name, const std::vector<Measurement>& head,
                        const std::vector<Measurement>& base, const Baseline* baseline, double threshold,
                        const common::DetectionSettings& settings) {
  CaseResult result;
  std::string reason = baseline ? baseline->reason : "";
  const Measurement* head_candidate = find_impl(head, "candidate");
  const Measurement* base_candidate = find_impl(base, "candidate");
  if (!head_candidate) return result;
  if (!baseline || !base_candidate) {
    Comparison none;
    none.note = baseline ? "the baseline run has no candidate measurement for this case" : "no baseline run";
    result.rows.push_back(comparison_row(name, "time", "candidate", baseline, reason, none));
    return result;
  }
  Comparison time = common::compare_times(timing_of(*head_candidate), timing_of(*base_candidate), threshold, settings);
  result.rows.push_back(comparison_row(name, "time", "candidate", baseline, reason, time));
  bool speedup_worse = false, speedup_better = false, any_speedup = false;
  for (const Measurement& m : head) {
    if (m.is_candidate()) continue;
    const Measurement* base_impl = find_impl(base, m.impl);
    if (!base_impl) continue;
    Comparison impl_time = common::compare_times(timing_of(m), timing_of(*base_impl), threshold, settings);
    result.rows.push_back(comparison_row(name, "time", m.impl, baseline, reason, impl_time));
    Comparison speedup = common::compare_speedups(timing_of(*head_candidate), timing_of(m), timing_of(*base_candidate),
                                                  timing_of(*base_impl), threshold, settings);
    result.rows.push_back(comparison_row(name, "speedup", m.impl, baseline, reason, speedup));
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
    result.rows[0]["note"] = std::string(result.rows[0]["note"]) +
                             (std::string(result.rows[0]["note"]).empty() ? "" : "; ") +
                             "not flagged: the in-run baselines moved alike (machine drift, not the kernel)";
  }
  return result;
}

std::map<std::string, std::vector<double>> load_history(pqxx::work& tx, const std::vector<std::string>& names,
                                                        std::int64_t project_id, const std::string& gpu,
                                                        const std::string& branch, std::int64_t run_id) {
  std::map<std::string, std::vector<double>> history;
  if (names.empty()) return history;
  for (const auto& row : tx.exec_prepared("detection_history", names_json(names).dump(), project_id, gpu, branch,
                                          run_id, static_cast<int>(kHistoryRuns))) {
    history[row[0].as<std::string>()] = json::parse(row[1].c_str()).get<std::vector<double>>();
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
          {"case_thresholds", case_thresholds}};
}

common::DetectionSettings DetectionRepository::detection_settings() { return {}; }

std::vector<Statement> DetectionRepository::statements() {
  return {{"detection_baseline_commit", kBaselineAtCommit},
          {"detection_baseline_branch", kBaselineOnBranch},
          {"detection_history", kHistory},
          {"detection_measurements", kMeasurementsOf},
          {"detection_insert", kInsertComparisons}};
}

ProjectSettings DetectionRepository::settings(pqxx::work& tx, std::int64_t project_id) {
  pqxx::row row =
      tx.exec_params1("SELECT name, default_branch, min_threshold FROM projects WHERE id = $1", project_id);
  ProjectSettings settings{project_id, row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<double>(), {}};
  for (const auto& c : tx.exec_params("SELECT case_name, min_threshold FROM case_settings WHERE project_id = $1",
                                      project_id)) {
    settings.case_thresholds[c[0].as<std::string>()] = c[1].as<double>();
  }
  return settings;
}

ProjectSettings DetectionRepository::update_settings(pqxx::work& tx, std::int64_t project_id, const json& changes) {
  if (!changes.is_object()) throw Unprocessable("settings: must be a JSON object");
  auto threshold_of = [](const json& value, const std::string& path) {
    if (!value.is_number()) throw Unprocessable(path + ": must be a number");
    double threshold = value.get<double>();
    if (!(threshold > 0 && threshold < 1)) throw Unprocessable(path + ": must be between 0 and 1 (0.02 = 2%)");
    return threshold;
  };
  for (const auto& [key, value] : changes.items()) {
    if (key == "default_branch") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        throw Unprocessable("default_branch: must be a non-empty string");
      }
      tx.exec_params0("UPDATE projects SET default_branch = $2 WHERE id = $1", project_id, value.get<std::string>());
    } else if (key == "min_threshold") {
      tx.exec_params0("UPDATE projects SET min_threshold = $2 WHERE id = $1", project_id,
                      threshold_of(value, "min_threshold"));
    } else if (key == "case_thresholds") {
      if (!value.is_object()) throw Unprocessable("case_thresholds: must be an object of case name -> number|null");
      for (const auto& [case_name, threshold] : value.items()) {
        if (threshold.is_null()) {
          tx.exec_params0("DELETE FROM case_settings WHERE project_id = $1 AND case_name = $2", project_id, case_name);
        } else {
          tx.exec_params0(
              "INSERT INTO case_settings (project_id, case_name, min_threshold) VALUES ($1, $2, $3) "
              "ON CONFLICT (project_id, case_name) DO UPDATE SET min_threshold = EXCLUDED.min_threshold",
              project_id, case_name, threshold_of(threshold, "case_thresholds." + case_name));
        }
      }
    } else {
      throw Unprocessable(key + ": unknown setting (default_branch, min_threshold, case_thresholds)");
    }
  }
  return settings(tx, project_id);
}

std::string DetectionRepository::evaluate_run(pqxx::work& tx, std::int64_t run_id, std::int64_t project_id,
                                              const common::RunReport& report) {
  ProjectSettings project = settings(tx, project_id);
  common::DetectionSettings detection = detection_settings();
  std::string gpu = report.device ? report.device->name : "none";

  std::vector<std::string> names;
  for (const common::Case& c : report.cases) {
    if (c.candidate()) names.push_back(c.name);
  }
  // A pull request compares with its base commit when that commit has a run
  // on this GPU model; everything else with the newest run on the default branch.
  std::map<std::string, Baseline> baselines;
  std::string default_reason = "newest run on " + project.default_branch + " on " + gpu;
  if (report.base_commit) {
    baselines = find_baselines(tx, "detection_baseline_commit", names, project_id, gpu, run_id, *report.base_commit,
                               "base_commit " + report.base_commit->substr(0, 12) + " on " + gpu);
    std::vector<std::string> missing;
    for (const std::string& name : names) {
      if (!baselines.contains(name)) missing.push_back(name);
    }
    default_reason = "base_commit " + report.base_commit->substr(0, 12) + " has no run of this case on " + gpu +
                     "; newest run on " + project.default_branch;
    auto fallback = find_baselines(tx, "detection_baseline_branch", missing, project_id, gpu, run_id,
                                   project.default_branch, default_reason);
    baselines.merge(fallback);
  } else {
    baselines = find_baselines(tx, "detection_baseline_branch", names, project_id, gpu, run_id,
                               project.default_branch, default_reason);
  }
  std::vector<std::int64_t> case_ids;
  for (const auto& [_, b] : baselines) case_ids.push_back(b.case_id);
  auto base_measurements = load_measurements(tx, case_ids);
  auto history = load_history(tx, names, project_id, gpu, project.default_branch, run_id);

  json rows = json::array();
  bool regression = false, improvement = false;
  for (const common::Case& c : report.cases) {
    if (!c.candidate()) continue;
    auto b = baselines.find(c.name);
    const Baseline* baseline = b == baselines.end() ? nullptr : &b->second;
    static const std::vector<Measurement> kNone;
    const std::vector<Measurement>& base =
        baseline && base_measurements.contains(baseline->case_id) ? base_measurements[baseline->case_id] : kNone;
    double threshold =
        common::noise_aware_threshold(history[c.name], project.min_threshold_for(c.name), detection);
    CaseResult result = compare_case(c.name, c.measurements, base, baseline, threshold, detection);
    regression = regression || result.status == ChangeStatus::regression;
    improvement = improvement || result.status == ChangeStatus::improvement;
    for (json& row : result.rows) rows.push_back(std::move(row));
  }
  if (!rows.empty()) tx.exec_prepared0("detection_insert", run_id, rows.dump());

  bool failed = false;
  for (const common::Stage& stage : report.stages) failed = failed || stage.status == common::StageStatus::failed;
  for (const common::Case& c : report.cases) failed = failed || (c.correctness && !c.correctness->passed);
  std::string verdict = failed ? "failed" : regression ? "regression" : improvement ? "improvement" : "pass";
  RunRepository::set_verdict(tx, run_id, verdict);
  return verdict;
}

json DetectionRepository::compare_commits(pqxx::work& tx, std::int64_t project_id, const std::string& base,
                                          const std::string& head, const std::string& gpu_model) {
  ProjectSettings project = settings(tx, project_id);
  common::DetectionSettings detection = detection_settings();
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
    Baseline baseline{base_run, base, 0, "commit " + base.substr(0, 12) + " on " + gpu + " (run " +
                                             std::to_string(base_run) + ")"};
    json rows = json::array();
    for (const auto& c : cases) {
      std::string name = c[0].as<std::string>();
      double threshold = common::noise_aware_threshold(history[name], project.min_threshold_for(name), detection);
      CaseResult result = compare_case(name, measurements[c[1].as<std::int64_t>()],
                                       measurements[c[2].as<std::int64_t>()], &baseline, threshold, detection);
      if (result.rows.empty()) continue;
      json row = result.rows[0];
      row["case"] = name;
      row["status"] = common::to_string(result.status);
      row["comparisons"] = result.rows;
      for (const char* drop : {"case_name", "kind", "impl", "baseline_run_id", "baseline_reason"}) row.erase(drop);
      rows.push_back(std::move(row));
    }
    std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
      auto effect = [](const json& row) { return row.contains("ratio") ? std::abs(std::log(row["ratio"].get<double>())) : 0.0; };
      return effect(a) > effect(b);
    });
    gpus.push_back({{"gpu_model", gpu}, {"head_run_id", head_run}, {"base_run_id", base_run}, {"cases", rows}});
  }
  return {{"project", project.name}, {"base", base}, {"head", head}, {"gpus", gpus}};
}

std::optional<std::string> DetectionRepository::acknowledge(pqxx::work& tx, std::int64_t run_id,
                                                            const std::string& who, const std::string& reason) {
  pqxx::result rows = tx.exec_params("SELECT verdict FROM runs WHERE id = $1 FOR UPDATE", run_id);
  if (rows.empty()) return std::nullopt;
  std::string verdict = rows[0][0].as<std::string>();
  if (verdict == "regression") {
    tx.exec_params0(
        "UPDATE runs SET verdict = 'pass', acknowledged_by = $2, acknowledged_reason = $3, acknowledged_at = now() "
        "WHERE id = $1",
        run_id, who, reason);
  }
  return verdict;
}

}  // namespace kw::server
