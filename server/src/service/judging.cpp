#include "service/judging.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "errors.hpp"
#include "kw/common/in_parts.hpp"
#include "kw/common/judge.hpp"

namespace kw::server {

namespace {

using common::ChangeStatus;
using common::Measurement;
using nlohmann::json;

const Measurement* find_impl(const std::vector<Measurement>& measurements, const std::string& impl) {
  for (const Measurement& m : measurements) {
    if (m.impl == impl) return &m;
  }
  return nullptr;
}

using common::CaseThreshold;

// How one implementation of a case was compared: its base measured in this
// job, else the baseline run.
std::string in_job_reason(const std::optional<std::string>& base_commit) {
  return base_commit ? "base_commit " + base_commit->substr(0, 12) +
                           " measured in this job, its replicates alternating with the head's"
                     : "base measured in this job";
}

ComparisonRow as_row(common::Comparison judged, const Baseline* baseline, std::string threshold_source,
                     const std::optional<std::string>& base_commit) {
  const bool in_job = judged.in_job;
  return {std::move(judged), in_job ? nullptr : baseline, std::move(threshold_source),
          in_job ? in_job_reason(base_commit) : ""};
}

// The run's decision as stored with it.
void add_decision(json& detection, const common::RunDecision& decision) {
  detection["comparisons"] = decision.candidate_comparisons;
  if (const auto& drift = decision.machine_drift) {
    detection["machine_drift"] = {{"median_change", drift->median_change},
                                  {"comparisons", drift->comparisons},
                                  {"same_direction", drift->same_direction},
                                  {"flagged", drift->flagged}};
  }
}

common::RunDecision decide_rows(std::vector<ComparisonRow>& rows, const common::DetectionSettings& settings) {
  std::vector<common::Comparison*> comparisons;
  for (ComparisonRow& row : rows) comparisons.push_back(&row);
  return common::decide_run(comparisons, settings);
}

// A case's threshold (common::case_threshold: the one precedence).
CaseThreshold threshold_for(const ProjectSettings& project, const common::RunReport& report,
                            const std::string& name) {
  return common::case_threshold(name, {project.min_threshold_for(name), "project setting"}, report.thresholds,
                                report.commit, report.base_thresholds, report.base_commit.value_or(""));
}

// What judging a run's cases reads, fetched once per run.
struct PlanInputs {
  const RunJudgingReads& reads;
  const common::RunReport& report;
  const common::DetectionSettings& detection;
  const std::map<std::string, Baseline>& baselines;
  const common::GpuNoise& gpu_noise;
};

// One case's comparisons: each implementation's time, and the candidate's
// energy where both sides measured it.
void judge_case(const PlanInputs& in, const common::Case& c, std::vector<ComparisonRow>& rows) {
  static const std::vector<Measurement> kNone;
  static const common::CaseHistory kNoHistory;
  auto b = in.baselines.find(c.name);
  const Baseline* baseline = b == in.baselines.end() ? nullptr : &b->second;
  auto stored =
      baseline ? in.reads.base_measurements.find(baseline->case_id) : in.reads.base_measurements.end();
  const std::vector<Measurement>& base = stored == in.reads.base_measurements.end() ? kNone : stored->second;
  auto h = in.reads.history.find(c.name);
  const common::CaseHistory& case_history = h == in.reads.history.end() ? kNoHistory : h->second;
  const common::NoiseModel noise = common::case_noise(case_history, in.gpu_noise, in.detection);
  CaseThreshold threshold = threshold_for(in.reads.project, in.report, c.name);
  for (const Measurement& m : c.measurements) {
    const Measurement* in_job = nullptr;
    for (const Measurement& bm : c.base_measurements) {
      if (bm.impl == m.impl) in_job = &bm;
    }
    // Only the candidate has a stored history; a baseline implementation
    // is judged against the baseline run alone.
    common::ComparedWith with{in_job, find_impl(base, m.impl), baseline != nullptr, {}};
    if (m.is_candidate() && baseline) with.history = case_history.through(baseline->run_id);
    rows.push_back(
        as_row(common::judge_time(c.name, &c, m, std::move(with), noise, threshold.value, in.detection),
               baseline, threshold.source, in.report.base_commit));
    if (!m.is_candidate()) continue;
    if (auto energy = common::judge_energy(c.name, m, in_job, find_impl(base, m.impl),
                                           in.reads.project.energy_threshold, in.detection)) {
      // Not judged when its time was not: the GPU braked.
      if (!rows.back().throttled_out)
        rows.push_back(as_row(std::move(*energy), baseline, "project setting (energy_threshold)",
                              in.report.base_commit));
    }
  }
}

// Cases are independent: they are judged on every core, in the order the
// report lists them.
std::vector<ComparisonRow> judge_cases(const PlanInputs& in) {
  std::vector<const common::Case*> measured;
  for (const common::Case& c : in.report.cases) {
    if (c.candidate()) measured.push_back(&c);
  }
  std::vector<ComparisonRow> rows;
  for (auto& part : common::in_parts(measured.size(), 16, [&](std::size_t begin, std::size_t end) {
         std::vector<ComparisonRow> judged;
         for (std::size_t i = begin; i < end; ++i) judge_case(in, *measured[i], judged);
         return judged;
       })) {
    for (ComparisonRow& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

enum class IdenticalClaim { confirmed, unchecked, disputed };

// A case the report claims identical to its base, held against the base's
// stored run: the claim is the agent's word only where no base run is stored.
IdenticalClaim check_identical(const common::Case& c,
                               const std::optional<RunJudgingReads::BaseFingerprints>& stored) {
  if (!stored) return IdenticalClaim::unchecked;
  const auto it = stored->digests.find(c.name);
  const bool same =
      it != stored->digests.end() && c.fingerprint && it->second == c.fingerprint->value("digest", "");
  return same ? IdenticalClaim::confirmed : IdenticalClaim::disputed;
}

// Skipping is for pull requests, judged against their base: a run of the
// default branch (or one without a base) is measured whole.
void refuse_skipping_outside_pull_requests(const RunJudgingReads& reads, const common::RunReport& report) {
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    if (!report.cases[i].identical_to_base) continue;
    const std::string field = "cases[" + std::to_string(i) + "].identical_to_base";
    if (!report.base_commit)
      throw Unprocessable("inconsistent", field,
                          "a case identical to the base needs the report's base_commit");
    if (report.branch == reads.project.default_branch)
      throw Unprocessable("inconsistent", field,
                          "a run of the default branch (" + report.branch +
                              ") is measured whole: skipping cases whose code is identical to a base is for "
                              "pull requests");
  }
}

// After the run's decision: a case identical to its base is unchanged, with
// the evidence instead of a test (it takes no part in the decision: nothing
// was measured), and an audited case the decision flagged says that its own
// code did not change.
void explain_fingerprints(const PlanInputs& in, std::vector<ComparisonRow>& rows) {
  std::set<std::string> audited;
  for (const common::Case& c : in.report.cases) {
    if (c.audit) audited.insert(c.name);
  }
  for (ComparisonRow& row : rows) {
    if (row.impl != "candidate" || row.status == ChangeStatus::unchanged ||
        row.status == ChangeStatus::no_baseline || !audited.contains(row.case_name))
      continue;
    row.test.note += std::string(row.test.note.empty() ? "" : "; ") +
                     "its code is identical to the base's (audited): the change is elsewhere (layout, "
                     "alignment, shared state)";
  }
  const std::string base = in.report.base_commit ? in.report.base_commit->substr(0, 12) : "the base";
  const auto& stored = in.reads.base_fingerprints;
  for (const common::Case& c : in.report.cases) {
    if (!c.identical_to_base) continue;
    common::Comparison identical;
    identical.case_name = c.name;
    identical.impl = "candidate";
    identical.in_job = true;
    const std::string digest = c.fingerprint->value("digest", "");
    std::string reason = "base_commit " + base + " runs the same code (its fingerprint)";
    switch (check_identical(c, stored)) {
      case IdenticalClaim::confirmed:
        identical.status = ChangeStatus::unchanged;
        identical.test.note = "unchanged: identical code (fingerprint " + digest.substr(0, 12) +
                              " in both; base run " + std::to_string(stored->run_id) + "), not timed";
        break;
      case IdenticalClaim::unchecked:
        identical.status = ChangeStatus::unchanged;
        identical.test.note = "unchanged by the agent's fingerprint (" + digest.substr(0, 12) +
                              "), not timed; " + base +
                              " has no stored run on this GPU model to check it against";
        reason =
            "the agent's fingerprints of base_commit " + base + " (no stored run of it on this GPU model)";
        break;
      case IdenticalClaim::disputed: {
        const auto it = stored->digests.find(c.name);
        identical.status = ChangeStatus::no_baseline;
        identical.test.note =
            "not measured: claimed identical to the base (fingerprint " + digest.substr(0, 12) +
            "), but base run " + std::to_string(stored->run_id) + " recorded " +
            (it == stored->digests.end() ? std::string("no fingerprint for it") : it->second.substr(0, 12)) +
            ": judged as changed, and not timed";
        reason = "base run " + std::to_string(stored->run_id) + " disagrees with the claim";
        break;
      }
    }
    CaseThreshold threshold = threshold_for(in.reads.project, in.report, c.name);
    identical.min_threshold = threshold.value;
    rows.emplace_back(std::move(identical), nullptr, threshold.source, reason);
  }
}

// The GPU model's learned noise, as the run's detection record shows it.
json noise_prior_json(const std::string& gpu, const common::GpuNoise& gpu_noise) {
  return {{"gpu_model", gpu},
          {"replicate_sd",
           gpu_noise.replicate.df > 0 ? gpu_noise.replicate.sd : common::default_noise().replicate_sd},
          {"replicate_df", gpu_noise.replicate.df},
          {"run_sd", gpu_noise.run.df > 0 ? gpu_noise.run.sd : common::default_noise().run_sd},
          {"run_df", gpu_noise.run.df}};
}

// The candidates' time comparisons: how many were judged, and how many were
// refused because the GPU braked.
struct CandidateCounts {
  std::size_t judged = 0, throttled_out = 0;
};
CandidateCounts candidate_counts(const std::vector<ComparisonRow>& rows) {
  CandidateCounts counts;
  for (const ComparisonRow& row : rows) {
    if (row.impl != "candidate" || row.kind != "time") continue;
    counts.throttled_out += row.throttled_out;
    counts.judged += row.measured();
  }
  return counts;
}

// failed, no-data, regression, improvement or pass.
std::string verdict_of(const PlanInputs& in, const common::RunDecision& decision,
                       const CandidateCounts& counts) {
  const common::RunReport& report = in.report;
  bool failed = false;
  for (const common::Stage& stage : report.stages)
    failed = failed || stage.status == common::StageStatus::failed;
  bool measured = false, disputed = false;
  for (const common::Case& c : report.cases) {
    failed = failed || (c.correctness && !c.correctness->passed);
    // A case identical to its base is decided by its code, not its time;
    // one whose claim the base's stored fingerprint disputes was not measured.
    const bool claim_holds =
        c.identical_to_base && check_identical(c, in.reads.base_fingerprints) != IdenticalClaim::disputed;
    disputed = disputed || (c.identical_to_base && !claim_holds);
    measured = measured || c.candidate() != nullptr || claim_holds;
  }
  // Nothing measured is no evidence of no regression, and neither is a run
  // measured only while the GPU throttled.
  const bool braked = counts.judged == 0 && counts.throttled_out > 0;
  return failed                            ? "failed"
         : decision.regression             ? "regression"
         : !measured || braked || disputed ? "no-data"
         : decision.improvement            ? "improvement"
                                           : "pass";
}

// A pull request that would pass while a case's slowdown is estimated far
// past its threshold, only without the evidence to flag it, is not waved
// through: the project's inconclusive_gate says whether the gate then
// answers "measure again" (no-data) or fails (regression). A run of the
// default branch keeps its verdict: it has merged, and a no-data run would
// leave the history the next runs are judged by. The cases are listed in the
// run's detection either way, for the commit status, the gate and the comment.
void apply_inconclusive_gate(const ProjectSettings& project, const common::RunReport& report,
                             const std::vector<ComparisonRow>& rows, std::string& verdict, json& detection) {
  json far = json::array();
  for (const ComparisonRow& row : rows) {
    if (row.impl != "candidate" || row.kind != "time" || row.status != ChangeStatus::inconclusive) continue;
    if (row.test.ratio - 1 < project.inconclusive_factor * row.min_threshold) continue;
    far.push_back({{"case", row.case_name}, {"ratio", row.test.ratio}, {"threshold", row.min_threshold}});
  }
  if (far.empty()) return;
  const bool passing = verdict == "pass" || verdict == "improvement";
  const bool pull_request = report.branch != project.default_branch;
  const std::string applied = passing && pull_request ? project.inconclusive_gate : "none";
  detection["inconclusive_gate"] = {{"policy", project.inconclusive_gate},
                                    {"factor", project.inconclusive_factor},
                                    {"applied", applied},
                                    {"cases", std::move(far)}};
  if (applied == "no-verdict") verdict = "no-data";
  if (applied == "fail") verdict = "regression";
}

}  // namespace

std::shared_ptr<const RunJudgement> judge_run(RunJudgingReads reads, const common::RunReport& report) {
  refuse_skipping_outside_pull_requests(reads, report);
  auto result = std::make_shared<RunJudgement>();
  result->baselines = std::move(reads.baselines);
  const common::DetectionSettings detection = reads.project.detection();
  result->settings = detection;
  const std::string gpu = report.device ? report.device->name : "none";
  const common::GpuNoise gpu_noise = common::learn_gpu_noise(reads.history, detection);

  const PlanInputs inputs{reads, report, detection, result->baselines, gpu_noise};
  result->rows = judge_cases(inputs);
  result->detection = {{"run_alpha", detection.run_alpha}, {"noise_prior", noise_prior_json(gpu, gpu_noise)}};
  const common::RunDecision decision = decide_rows(result->rows, detection);
  add_decision(result->detection, decision);
  // Counted before the unchanged cases join the rows: they were not timed.
  const CandidateCounts counts = candidate_counts(result->rows);
  result->verdict = verdict_of(inputs, decision, counts);
  apply_inconclusive_gate(reads.project, report, result->rows, result->verdict, result->detection);
  if (counts.throttled_out > 0) result->detection["throttled_out"] = counts.throttled_out;
  explain_fingerprints(inputs, result->rows);
  return result;
}

std::vector<std::pair<std::string, std::string>> RunJudgement::case_statuses() const {
  std::vector<std::pair<std::string, std::string>> statuses;
  for (const ComparisonRow& row : rows) {
    if (row.impl == "candidate" && row.kind == "time")
      statuses.emplace_back(row.case_name, std::string(common::to_string(row.status)));
  }
  return statuses;
}

namespace {

// Each case's candidate comparison with every implementation's beside it,
// of the statuses asked for. `rows`: comparisons as JSON, in case order.
std::vector<json> candidate_entries(std::vector<json> rows, const CaseFilter& filter) {
  std::map<std::string, json> by_case;
  for (const json& row : rows) by_case[row["case"].get<std::string>()].push_back(row);
  const std::string statuses = "," + filter.statuses + ",";
  std::vector<json> kept;
  for (json& entry : rows) {
    if (entry["impl"] != "candidate") continue;
    if (!filter.statuses.empty() &&
        statuses.find("," + entry["status"].get<std::string>() + ",") == std::string::npos)
      continue;
    entry["comparisons"] = by_case[entry["case"].get<std::string>()];
    for (const char* drop : {"kind", "impl", "baseline_run_id", "baseline_reason"}) entry.erase(drop);
    kept.push_back(std::move(entry));
  }
  return kept;
}

// The page asked for, largest effect first: the "paging" object and the
// page's cases.
std::pair<json, json> page_by_effect(std::vector<json> kept, const Page& page) {
  auto effect = [](const json& row) {
    return row.contains("ratio") && row["ratio"].is_number() ? std::abs(std::log(row["ratio"].get<double>()))
                                                             : 0.0;
  };
  std::stable_sort(kept.begin(), kept.end(),
                   [&](const json& a, const json& b) { return effect(a) > effect(b); });
  const auto total = static_cast<std::int64_t>(kept.size());
  const std::int64_t first = std::min(page.offset(), total);
  const std::int64_t last = std::min(first + page.per_page, total);
  json paging = {{"page", page.number},
                 {"per_page", page.per_page},
                 {"cases_total", total},
                 {"pages", std::max<std::int64_t>(1, (total + page.per_page - 1) / page.per_page)}};
  return {std::move(paging), json(std::vector<json>(std::make_move_iterator(kept.begin() + first),
                                                    std::make_move_iterator(kept.begin() + last)))};
}

std::pair<json, json> compared_cases(const std::vector<ComparisonRow>& rows,
                                     const common::DetectionSettings& detection, const CaseFilter& filter,
                                     const Page& page) {
  std::vector<json> as_json;
  as_json.reserve(rows.size());
  for (const ComparisonRow& row : rows) as_json.push_back(row.to_json(detection));
  return page_by_effect(candidate_entries(std::move(as_json), filter), page);
}

// The rows of two runs of different jobs, judged case by case.
std::vector<ComparisonRow> cross_run_rows(const ProjectSettings& project, const CommitRuns& runs,
                                          const CrossRunReads& reads, const Baseline& baseline) {
  const common::DetectionSettings detection = project.detection();
  const common::GpuNoise gpu_noise = common::learn_gpu_noise(reads.history, detection);
  static const common::CaseHistory kNoHistory;
  std::vector<ComparisonRow> rows;
  for (const CrossRunReads::Case& c : reads.cases) {
    auto judged = reads.judged_thresholds.find(c.name);
    // The project's setting for a case the head run did not judge.
    CaseThreshold threshold = judged != reads.judged_thresholds.end()
                                  ? CaseThreshold{judged->second.first, judged->second.second}
                                  : CaseThreshold{project.min_threshold_for(c.name), "project setting"};
    auto h = reads.history.find(c.name);
    const common::CaseHistory& case_history = h == reads.history.end() ? kNoHistory : h->second;
    const common::NoiseModel noise = common::case_noise(case_history, gpu_noise, detection);
    for (const Measurement& m : c.head) {
      common::ComparedWith with{nullptr, find_impl(c.base, m.impl), true, {}};
      if (m.is_candidate()) with.history = case_history.through(*runs.base_run);
      rows.push_back(
          as_row(common::judge_time(c.name, nullptr, m, std::move(with), noise, threshold.value, detection),
                 &baseline, threshold.source, std::nullopt));
    }
  }
  return rows;
}

}  // namespace

json in_job_comparison(const CommitRuns& runs, std::vector<json> judged_times, json detection,
                       const CaseFilter& filter, const Page& page) {
  auto [paging, shown] = page_by_effect(candidate_entries(std::move(judged_times), filter), page);
  return {{"gpu_model", runs.gpu},
          {"head_run_id", runs.head_run},
          {"base_run_id", runs.base_run ? json(*runs.base_run) : json(nullptr)},
          {"source", "in_job"},
          {"rule_version", runs.head_rule_version},
          {"source_note", "as run " + std::to_string(runs.head_run) +
                              " judged it: base and head measured in the same job, their replicates "
                              "alternating on one GPU"},
          {"detection", std::move(detection)},
          {"paging", std::move(paging)},
          {"cases", std::move(shown)}};
}

json cross_run_comparison(const ProjectSettings& project, const CommitRuns& runs, const std::string& base,
                          const CrossRunReads& reads, const CaseFilter& filter, const Page& page) {
  const Baseline baseline{
      *runs.base_run, base, 0,
      "commit " + base.substr(0, 12) + " on " + runs.gpu + " (run " + std::to_string(*runs.base_run) + ")"};
  std::vector<ComparisonRow> rows = cross_run_rows(project, runs, reads, baseline);
  const common::DetectionSettings detection = project.detection();
  json decision;
  add_decision(decision, decide_rows(rows, detection));
  auto [paging, shown] = compared_cases(rows, detection, filter, page);
  return {{"gpu_model", runs.gpu},
          {"head_run_id", runs.head_run},
          {"base_run_id", *runs.base_run},
          {"source", "cross_run"},
          {"rule_version", common::kRuleVersion},
          {"source_note", "run " + std::to_string(runs.head_run) + " against run " +
                              std::to_string(*runs.base_run) +
                              ", measured in different jobs: the between-run noise is in the interval"},
          {"detection", decision},
          {"paging", std::move(paging)},
          {"cases", std::move(shown)}};
}

}  // namespace kw::server
