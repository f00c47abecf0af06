// A run of the in-memory stand-in (in_memory_runs.hpp) read back as
// PostgreSQL builds its JSON documents (store/run_repository.cpp's
// kRunHead, kRunComparisons and kRunCases): the same members, nulls where a
// column is NULL, samples and clocks as PostgreSQL's real prints them. It
// keeps no timestamps of its own: created_at is null and the report's times
// are shown as it wrote them. run_store_contract.hpp compares the two.
#pragma once

#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "in_memory_state.hpp"
#include "model/judging.hpp"
#include "model/runs.hpp"

namespace kw::server::testing {

// `text` ILIKE `pattern` ('' matches everything): % any run of characters,
// _ one, a backslash escapes the next, letters match either case.
inline bool like_matches(const std::string& text, const std::string& pattern) {
  if (pattern.empty()) return true;
  auto same = [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  };
  // Positions reached in `text` after each pattern element.
  std::vector<bool> at(text.size() + 1, false);
  at[0] = true;
  for (std::size_t p = 0; p < pattern.size(); ++p) {
    std::vector<bool> next(text.size() + 1, false);
    if (pattern[p] == '%') {
      bool reached = false;
      for (std::size_t i = 0; i <= text.size(); ++i) next[i] = reached = reached || at[i];
    } else {
      const bool any = pattern[p] == '_';
      if (pattern[p] == '\\' && p + 1 < pattern.size()) ++p;
      for (std::size_t i = 0; i < text.size(); ++i) next[i + 1] = at[i] && (any || same(text[i], pattern[p]));
    }
    at = std::move(next);
  }
  return at[text.size()];
}

// A double stored as real and printed by PostgreSQL: the nearest float, in
// the fewest digits that read back as it.
inline double as_real(double value) {
  char buffer[32];
  auto printed = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<float>(value));
  double back = 0;
  std::from_chars(buffer, printed.ptr, back);
  return back;
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

// An array column written NULL when empty.
template <typename T>
nlohmann::json array_or_null(const std::vector<T>& values) {
  return values.empty() ? nlohmann::json() : nlohmann::json(values);
}

// A comparison as kRunComparisons reads it back.
inline nlohmann::json comparison_json(const ComparisonRow& row, const common::DetectionSettings& settings) {
  const common::CaseTest& t = row.test;
  const bool measured = row.measured();
  auto number = [&](double value) { return measured ? nlohmann::json(value) : nlohmann::json(); };
  return {{"case", row.case_name},
          {"kind", row.kind},
          {"impl", row.impl},
          {"status", common::to_string(row.status)},
          {"baseline_run_id", row.baseline ? nlohmann::json(row.baseline->run_id) : nlohmann::json()},
          {"baseline_reason", row.reason_text()},
          {"ratio", number(t.ratio)},
          {"ratio_of_medians", number(row.ratio_of_medians)},
          {"lower", number(t.lower)},
          {"upper", number(t.upper)},
          {"confidence", number(1 - settings.run_alpha)},
          {"p_value", number(t.p_value)},
          {"threshold", number(row.min_threshold)},
          {"threshold_source", row.threshold_source},
          {"head_noise", number(t.head_replicate_sd)},
          {"base_noise", number(t.base_replicate_sd)},
          {"head_samples", measured ? nlohmann::json(t.head_replicates) : nlohmann::json()},
          {"base_samples", measured ? nlohmann::json(t.base_replicates) : nlohmann::json()},
          {"excluded_throttled", row.excluded_throttled},
          {"note", t.note},
          {"method", measured ? nlohmann::json(common::to_string(t.method)) : nlohmann::json()},
          {"se", number(t.se)},
          {"df", number(t.df)},
          {"first_pass", row.first_pass_json()},
          {"detectable", row.detectable ? nlohmann::json(*row.detectable) : nlohmann::json()}};
}

// One side's measurements as kRunCases lists them: the candidate first,
// then by name; null where the side measured nothing (`base`).
inline nlohmann::json measurements_json(const std::vector<common::Measurement>& measured, bool base) {
  std::vector<const common::Measurement*> ordered;
  for (const common::Measurement& m : measured) ordered.push_back(&m);
  std::stable_sort(
      ordered.begin(), ordered.end(), [](const common::Measurement* a, const common::Measurement* b) {
        return std::make_pair(!a->is_candidate(), a->impl) < std::make_pair(!b->is_candidate(), b->impl);
      });
  if (ordered.empty()) return base ? nlohmann::json() : nlohmann::json::array();
  nlohmann::json list = nlohmann::json::array();
  for (const common::Measurement* m : ordered) {
    nlohmann::json samples = nlohmann::json::array(), clocks = nlohmann::json::array();
    for (double sample : m->samples_ns) samples.push_back(as_real(sample));
    for (double mhz : m->sm_mhz) clocks.push_back(as_real(mhz));
    nlohmann::json shown{{"impl", m->impl},
                         {"samples_ns", samples},
                         {"median_ns", m->median_ns},
                         {"throttled_samples", m->throttled_samples},
                         {"replicates", array_or_null(m->replicates)},
                         {"sm_mhz", m->sm_mhz.empty() ? nlohmann::json() : clocks},
                         {"energy_j", array_or_null(m->energy_j)},
                         {"energy_replicates", array_or_null(m->energy_replicates)},
                         {"power_w", array_or_null(m->power_w)},
                         {"samples_kept", true},
                         {"replicate_location", common::to_string(m->replicate_location)}};
    if (!base) {
      shown["flops"] = or_null(m->flops);
      shown["bytes"] = or_null(m->bytes);
      shown["peak_mem_bytes"] = or_null(m->peak_mem_bytes);
    }
    list.push_back(std::move(shown));
  }
  return list;
}

// A case as kRunCases reads it back.
inline nlohmann::json case_json(const MemoryCase& stored) {
  const common::Case& c = *stored.measured;
  const nlohmann::json& posted = *stored.posted;
  auto as_posted = [&](const char* key) { return posted.contains(key) ? posted[key] : nlohmann::json(); };
  nlohmann::json launches = nlohmann::json::array();
  for (const common::Launch& l : c.launches) {
    launches.push_back({{"kernel", l.kernel},
                        {"grid", l.grid},
                        {"block", l.block},
                        {"registers", l.registers},
                        {"static_smem", l.static_smem},
                        {"dynamic_smem", l.dynamic_smem},
                        {"duration_ns", or_null(l.duration_ns)}});
  }
  return {{"name", c.name},
          {"params", posted.contains("params") ? posted["params"] : nlohmann::json::object()},
          {"expected_launch", as_posted("expected_launch")},
          {"correctness", as_posted("correctness")},
          {"gpu_state", as_posted("gpu_state")},
          {"launches", launches},
          {"first_pass_replicates", or_null(c.first_pass_replicates)},
          {"fingerprint", as_posted("fingerprint")},
          {"identical_to_base", c.identical_to_base},
          {"audit", c.audit},
          {"changed_from_base", as_posted("changed_from_base")},
          {"measurements", measurements_json(c.measurements, false)},
          {"base_measurements", measurements_json(c.base_measurements, true)}};
}

// The medians of one side's measurements, by implementation: the
// candidate's, and the others' as an object (null where there are none).
inline std::pair<nlohmann::json, nlohmann::json> medians_of(
    const std::vector<common::Measurement>& measured) {
  nlohmann::json candidate, others;
  for (const common::Measurement& m : measured) {
    if (m.is_candidate())
      candidate = m.median_ns;
    else
      others[m.impl] = m.median_ns;
  }
  return {candidate, others};
}

// The candidates flagged regression or improvement, the regressions first, the largest ratio first.
inline nlohmann::json flagged_json(const MemoryRun& run) {
  std::vector<nlohmann::json> flagged;
  if (run.comparisons) {
    for (const nlohmann::json& row : *run.comparisons) {
      if (row["impl"] != "candidate" || row["kind"] != "time" ||
          (row["status"] != "regression" && row["status"] != "improvement"))
        continue;
      const MemoryCase* c = nullptr;
      for (const MemoryCase& each : *run.cases)
        if (each.measured->name == row["case"]) c = &each;
      auto [head_ns, head_baselines] = medians_of(c->measured->measurements);
      auto [base_ns, base_baselines] = medians_of(c->measured->base_measurements);
      nlohmann::json shown{{"head_ns", head_ns},
                           {"base_ns", base_ns},
                           {"head_baselines", head_baselines},
                           {"base_baselines", base_baselines}};
      for (const char* key :
           {"case", "status", "ratio", "lower", "upper", "p_value", "threshold", "head_noise", "base_noise",
            "detectable", "ratio_of_medians", "baseline_reason", "baseline_run_id", "changed"})
        shown[key] = row[key];
      flagged.push_back(std::move(shown));
    }
  }
  std::stable_sort(flagged.begin(), flagged.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return std::make_pair(a["status"] != "regression", -a["ratio"].get<double>()) <
           std::make_pair(b["status"] != "regression", -b["ratio"].get<double>());
  });
  return flagged;
}

inline nlohmann::json fingerprints_json(const MemoryRun& run) {
  int identical = 0, audited = 0, misses = 0, timed = 0;
  for (const MemoryCase& c : *run.cases) {
    identical += c.measured->identical_to_base;
    audited += c.measured->audit;
    misses += c.measured->audit && (c.status == "regression" || c.status == "improvement");
    timed += !c.measured->identical_to_base && c.summary.candidate.has_value();
  }
  return {{"identical_to_base", identical}, {"audited", audited}, {"audit_misses", misses}, {"timed", timed}};
}

inline nlohmann::json acknowledgement_json(MemoryState& state, const MemoryRun& run) {
  if (!run.acknowledgement) return nullptr;
  nlohmann::json carried_from;
  if (const auto& from = run.acknowledgement->from) {
    const MemoryRun& source = *state.run(*from);
    const nlohmann::json& tree = run.git("tree");
    carried_from = {{"run_id", source.id},
                    {"commit", source.report().commit},
                    {"branch", source.report().branch},
                    {"same_tree", tree.is_string() && source.git("tree").is_string()
                                      ? nlohmann::json(tree == source.git("tree"))
                                      : nlohmann::json()}};
  }
  return {{"by", run.acknowledgement->by},
          {"reason", run.acknowledgement->reason},
          {"at", nullptr},
          {"carried_from", carried_from}};
}

// kRunHead: everything of the run but its cases and comparisons.
inline nlohmann::json run_head_json(MemoryState& state, const MemoryRun& run, const Page& page) {
  const common::RunReport& report = run.report();
  const nlohmann::json& document = run.stored->document;
  nlohmann::json stages = nlohmann::json::array();
  for (const common::Stage& stage : report.stages) {
    const nlohmann::json posted = common::to_json(stage);
    stages.push_back({{"name", posted["name"]},
                      {"status", posted["status"]},
                      {"duration_ms", posted["duration_ms"]},
                      {"gpu_seconds", posted.value("gpu_seconds", nlohmann::json())},
                      {"message", posted["message"]},
                      {"log_tail", posted["log_tail"]},
                      {"details", posted["details"]}});
  }
  nlohmann::json git;
  if (run.git("tree").is_string())
    git = {{"tree", run.git("tree")},
           {"parents", run.git("parents").is_array() ? run.git("parents") : nlohmann::json::array()},
           {"author", run.git("author")},
           {"subject", run.git("subject")},
           {"committed_at", run.git("committed_at")}};
  const auto total = static_cast<std::int64_t>(run.cases->size());
  return {{"id", run.id},
          {"project", state.project(run.project_id).name},
          {"job_id", or_null(run.job_id)},
          {"commit", report.commit},
          {"branch", report.branch},
          {"base_commit", or_null(report.base_commit)},
          {"agent",
           {{"name", report.agent.name}, {"version", report.agent.version}, {"host", report.agent.host}}},
          {"gpu_model", run.gpu_model},
          {"device", report.device ? document["device"] : nlohmann::json()},
          {"started_at", report.started_at},
          {"finished_at", report.finished_at},
          {"gpu_seconds", report.gpu_seconds},
          {"verdict", run.verdict},
          {"created_at", nullptr},
          {"detection", run.detection},
          {"rule_version", run.rule_version},
          {"git", git},
          {"acknowledgement", acknowledgement_json(state, run)},
          {"stages", stages},
          {"flagged", flagged_json(run)},
          {"inconclusive", run.comparisons ? std::count_if(run.comparisons->begin(), run.comparisons->end(),
                                                           [](const nlohmann::json& row) {
                                                             return row["impl"] == "candidate" &&
                                                                    row["kind"] == "time" &&
                                                                    row["status"] == "inconclusive";
                                                           })
                                           : 0},
          {"undetectable", run.comparisons ? std::count_if(run.comparisons->begin(), run.comparisons->end(),
                                                           [](const nlohmann::json& row) {
                                                             return row["impl"] == "candidate" &&
                                                                    row["kind"] == "time" &&
                                                                    row["detectable"].is_number() &&
                                                                    row["detectable"] > row["threshold"];
                                                           })
                                           : 0},
          {"fingerprints", fingerprints_json(run)},
          {"bisect", nullptr},
          {"profiles", nlohmann::json::array()},
          {"paging",
           {{"page", page.offset() / page.per_page + 1},
            {"per_page", page.per_page},
            {"cases_total", total},
            {"pages", std::max<std::int64_t>(1, (total + page.per_page - 1) / page.per_page)}}}};
}

}  // namespace kw::server::testing
