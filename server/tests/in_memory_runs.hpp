// The runs of the in-memory stand-in for kw-server's database
// (in_memory_store.hpp), as RunRepository and DetectionRepository keep
// them: a report stored once per project and canonical form; each case's
// baseline the newest judged run of its name on the GPU model (a pull
// request's base commit's first, else the default branch's); its history
// the newest 30 such runs on the default branch under the current rule;
// acknowledgements carried between runs of the same change; and a run read
// back as the JSON documents PostgreSQL builds (in_memory_run_json.hpp).
//
// Both it and PgRunStore pass run_store_contract.hpp. What it does not keep
// is tested on PostgreSQL only, and asking for it throws std::logic_error
// rather than answering wrongly: profile jobs (a regression where
// an agent can profile its GPU), explanations, and samples expiring (they
// are always kept here).
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "in_memory_queue.hpp"
#include "in_memory_run_json.hpp"
#include "in_memory_state.hpp"
#include "kw/common/acknowledgement.hpp"
#include "kw/common/detection.hpp"
#include "service/run_store.hpp"

namespace kw::server::testing {

class InMemoryRuns final : public RunTransaction {
 public:
  explicit InMemoryRuns(MemoryState& state) : s_(state), queue_(state) {}

  JobTransaction& queue() override { return queue_; }

  std::optional<std::int64_t> find_project(const std::string& name) override {
    const ProjectSettings* project = s_.find_project(name);
    return project ? std::optional<std::int64_t>(project->id) : std::nullopt;
  }

  std::optional<std::string> project_of_run(std::int64_t run_id) override {
    const MemoryRun* run = s_.run(run_id);
    return run ? std::optional<std::string>(s_.project(run->project_id).name) : std::nullopt;
  }

  RunJudgingReads judging_reads(const std::string& project, const common::RunReport& report) override {
    RunJudgingReads reads;
    if (const ProjectSettings* found = s_.find_project(project)) reads.project = *found;
    const std::string gpu = report.device ? report.device->name : "none";
    std::vector<std::string> names;
    for (const common::Case& c : report.cases)
      if (c.candidate()) names.push_back(c.name);
    reads.baselines = baselines_of(names, reads.project, gpu, report);
    for (const auto& [name, baseline] : reads.baselines)
      reads.base_measurements[baseline.case_id] = stored_measurements(baseline.case_id);
    reads.history = history_of(names, reads.project, gpu, 0);
    const MemoryRun* base = nullptr;
    for (const MemoryRun& run : s_.runs) {
      if (report.base_commit && run.project_id == reads.project.id && run.verdict != "pending" &&
          run.gpu_model == gpu && run.report().commit == *report.base_commit)
        base = &run;  // the newest: ids grow
    }
    const bool claims = std::any_of(report.cases.begin(), report.cases.end(),
                                    [](const common::Case& c) { return c.identical_to_base; });
    if (base && claims) {
      reads.base_fingerprints = RunJudgingReads::BaseFingerprints{base->id, {}};
      for (const MemoryCase& c : *base->cases) {
        if (c.measured->fingerprint && c.measured->fingerprint->contains("digest"))
          reads.base_fingerprints->digests[c.measured->name] = (*c.measured->fingerprint)["digest"];
      }
    }
    return reads;
  }

  std::optional<StoredRun> find_stored(std::int64_t project_id, const std::string& canonical) override {
    const std::string sha = common::sha256_hex(canonical);
    for (const MemoryRun& run : s_.runs) {
      if (run.project_id == project_id && run.stored->sha256 == sha)
        return StoredRun{run.id, true, run.verdict, 0, nullptr};
    }
    return std::nullopt;
  }

  StoredRun store(std::int64_t project_id, const common::RunReport& report,
                  const std::vector<common::CaseSummary>& summaries, const nlohmann::json& document,
                  const std::string& canonical, std::optional<std::int64_t> job_id) override {
    if (auto stored = find_stored(project_id, canonical)) return *stored;
    MemoryRun run;
    run.id = static_cast<std::int64_t>(s_.runs.size()) + 1;
    run.project_id = project_id;
    run.job_id = job_id;
    run.gpu_model = report.device ? report.device->name : "none";
    run.rule_version = common::kRuleVersion;
    auto stored =
        std::make_shared<MemoryRunReport>(MemoryRunReport{report, document, common::sha256_hex(canonical)});
    auto cases = std::make_shared<std::vector<MemoryCase>>();
    for (std::size_t i = 0; i < stored->report.cases.size(); ++i)
      cases->push_back(
          {++s_.cases, &stored->report.cases[i], &stored->document["cases"][i], summaries.at(i), ""});
    run.stored = std::move(stored);
    run.cases = std::move(cases);
    s_.runs.push_back(std::move(run));
    return StoredRun{s_.runs.back().id, false, "pending", project_id, nullptr};
  }

  std::string store_judgement(const StoredRun& stored, const RunJudgement& judgement) override {
    MemoryRun& run = *s_.run(stored.run_id);
    const auto statuses = judgement.case_statuses();
    const std::map<std::string, std::string> status_of(statuses.begin(), statuses.end());
    auto cases = std::make_shared<std::vector<MemoryCase>>(*run.cases);
    std::map<std::string, std::size_t> ordinal_of;
    for (MemoryCase& c : *cases) {
      auto status = status_of.find(c.measured->name);
      c.status = status != status_of.end() ? status->second : "no-baseline";
      ordinal_of.emplace(c.measured->name, ordinal_of.size());
    }
    run.cases = std::move(cases);
    auto rows = std::make_shared<std::vector<nlohmann::json>>();
    // What each case's fingerprint changed from the base's, as the report said (kRunComparisons' `changed`).
    std::map<std::string, nlohmann::json> changed;
    for (const MemoryCase& c : *run.cases)
      changed[c.measured->name] =
          c.measured->changed_from_base ? (*c.measured->changed_from_base)["differs"] : nlohmann::json();
    for (const ComparisonRow& row : judgement.rows) {
      rows->push_back(comparison_json(row, judgement.settings));
      rows->back()["changed"] = changed[row.case_name];
    }
    // As the run page lists them: case order, time before energy, the candidate first.
    std::stable_sort(rows->begin(), rows->end(), [&](const nlohmann::json& a, const nlohmann::json& b) {
      auto key = [&](const nlohmann::json& row) {
        const std::string impl = row["impl"];
        return std::make_tuple(ordinal_of.at(row["case"]), row["kind"] != "time", impl != "candidate", impl);
      };
      return key(a) < key(b);
    });
    run.comparisons = std::move(rows);
    run.verdict = judgement.verdict;
    run.detection = judgement.detection;
    if (run.verdict == "regression" && carry_acknowledgement(run.id)) return "pass";
    return run.verdict;
  }

  void profile_regression(std::int64_t run_id, int /*max_attempts*/) override {
    const MemoryRun& run = *s_.run(run_id);
    if (flagged(run, "regression").empty()) return;
    for (const MemoryAgent& agent : s_.agents) {
      const bool runs_it = std::find(agent.gpus.begin(), agent.gpus.end(), run.gpu_model) != agent.gpus.end();
      if (agent.can_profile && runs_it) throw std::logic_error(kNotKept + std::string("profile jobs"));
    }
  }

  // The overview's rows (case_heads): the history reads are not served from this store.
  void advance_case_heads(std::int64_t /*run_id*/) override {}

  void verdict_announced(std::int64_t run_id) override { s_.notices.push_back({"verdict", 0, run_id}); }

  std::optional<RunHead> run_head(std::int64_t run_id, const Page& page) override {
    const MemoryRun* run = s_.run(run_id);
    if (!run) return std::nullopt;
    return RunHead{run_head_json(s_, *run, page).dump(), static_cast<std::int64_t>(run->cases->size())};
  }

  std::string run_comparisons_json(std::int64_t run_id, std::int64_t first, std::int64_t end) override {
    return comparisons_in(*s_.run(run_id), first, end, "").dump();
  }

  std::string run_cases_json(std::int64_t run_id, std::int64_t first, std::int64_t end) override {
    const MemoryRun& run = *s_.run(run_id);
    nlohmann::json cases = nlohmann::json::array();
    for (std::int64_t i = std::max<std::int64_t>(first, 0);
         i < std::min(end, static_cast<std::int64_t>(run.cases->size())); ++i)
      cases.push_back(case_json((*run.cases)[static_cast<std::size_t>(i)]));
    return cases.dump();
  }

  nlohmann::json explanation(std::int64_t /*run_id*/, const std::string& /*case_name*/) override {
    throw std::logic_error(kNotKept + std::string("explanations (launches against the baseline's)"));
  }

  std::optional<Acknowledged> acknowledge(std::int64_t run_id, const std::string& who,
                                          const std::string& reason) override {
    MemoryRun* run = s_.run(run_id);
    if (!run) return std::nullopt;
    Acknowledged result{run->verdict, {}};
    if (result.previous_verdict != "regression") return result;
    run->verdict = "pass";
    run->acknowledgement = MemoryAcknowledgement{who, reason, std::nullopt};
    const Flags acknowledged = regressions_of(*run);
    for (std::int64_t to : same_change(*run, Direction::to)) {
      if (!common::acknowledgement_covers(acknowledged, regressions_of(*s_.run(to)))) continue;
      carry(run_id, to);
      result.carried_to.push_back(to);
    }
    return result;
  }

  std::vector<std::string> measured_commits_with_prefix(std::int64_t project_id, const std::string& prefix,
                                                        int limit) override {
    std::set<std::string> commits;
    for (const MemoryRun& run : s_.runs) {
      if ((project_id == 0 || run.project_id == project_id) && run.report().commit.starts_with(prefix))
        commits.insert(run.report().commit);
    }
    std::vector<std::string> first(commits.begin(), commits.end());
    if (first.size() > static_cast<std::size_t>(limit)) first.resize(static_cast<std::size_t>(limit));
    return first;
  }

  std::optional<std::string> newest_commit_on_branch(std::int64_t project_id,
                                                     const std::string& branch) override {
    const MemoryRun* newest = nullptr;
    auto finished = [](const MemoryRun& run) {
      return common::parse_rfc3339(run.report().finished_at).value_or(0);
    };
    for (const MemoryRun& run : s_.runs) {
      if (run.report().branch != branch || (project_id != 0 && run.project_id != project_id)) continue;
      if (!newest || std::make_pair(finished(run), run.id) > std::make_pair(finished(*newest), newest->id))
        newest = &run;
    }
    return newest ? std::optional<std::string>(newest->report().commit) : std::nullopt;
  }

  std::vector<std::int64_t> projects_with_commit(const std::string& commit) override {
    std::set<std::int64_t> projects;
    for (const MemoryRun& run : s_.runs)
      if (run.report().commit == commit) projects.insert(run.project_id);
    return {projects.begin(), projects.end()};
  }

  std::vector<CommitRuns> commit_runs(std::int64_t project_id, const std::string& base,
                                      const std::string& head, const std::string& gpu_model) override {
    std::map<std::string, const MemoryRun*> heads, bases;
    for (const MemoryRun& run : s_.runs) {
      if (run.project_id != project_id || run.verdict == "pending") continue;
      if (run.report().commit == head) heads[run.gpu_model] = &run;  // the newest: ids grow
      if (run.report().commit == base) bases[run.gpu_model] = &run;
    }
    std::vector<CommitRuns> runs;
    for (const auto& [gpu, run] : heads) {
      if (!gpu_model.empty() && gpu != gpu_model) continue;
      CommitRuns pair{gpu, run->id, std::nullopt, false, run->rule_version};
      if (auto b = bases.find(gpu); b != bases.end()) pair.base_run = b->second->id;
      const bool measured_base = std::any_of(run->cases->begin(), run->cases->end(), [](const MemoryCase& c) {
        return !c.measured->base_measurements.empty();
      });
      pair.base_in_job = run->report().base_commit == base && measured_base;
      runs.push_back(pair);
    }
    return runs;
  }

  std::pair<std::vector<nlohmann::json>, nlohmann::json> judged_times(std::int64_t run_id,
                                                                      const std::string& name_like) override {
    const MemoryRun& run = *s_.run(run_id);
    std::vector<nlohmann::json> rows;
    for (nlohmann::json& row : comparisons_in(run, 0, INT64_MAX, name_like))
      if (row["kind"] == "time") rows.push_back(std::move(row));
    return {std::move(rows), run.detection.is_null() ? nlohmann::json::object() : run.detection};
  }

  CrossRunReads cross_run_reads(const ProjectSettings& project, const CommitRuns& runs,
                                const std::string& name_like) override {
    const MemoryRun& head = *s_.run(runs.head_run);
    const MemoryRun* base = runs.base_run ? s_.run(*runs.base_run) : nullptr;
    CrossRunReads reads;
    std::vector<std::string> names;
    for (const MemoryCase& c : *head.cases) {
      const MemoryCase* in_base = base ? case_named(*base, c.measured->name) : nullptr;
      if (!in_base || !like_matches(c.measured->name, name_like)) continue;
      names.push_back(c.measured->name);
      reads.cases.push_back({c.measured->name, stored_measurements(c.id), stored_measurements(in_base->id)});
    }
    reads.history = history_of(names, project, runs.gpu, head.id);
    for (const nlohmann::json& row : *head.comparisons) {
      if (row["impl"] != "candidate" || row["kind"] != "time" || row["threshold"].is_null()) continue;
      reads.judged_thresholds[row["case"]] = {row["threshold"].get<double>(), row["threshold_source"]};
    }
    return reads;
  }

 private:
  static constexpr const char* kNotKept = "the in-memory store keeps no ";
  static constexpr std::size_t kHistoryRuns = common::DetectionSettings{}.history_runs;
  using Flags = std::map<std::string, common::FlaggedRegression>;
  enum class Direction { from, to };

  static bool judged(const MemoryRun& run) {
    return run.verdict == "pass" || run.verdict == "improvement" || run.verdict == "regression";
  }

  static const MemoryCase* case_named(const MemoryRun& run, const std::string& name) {
    for (const MemoryCase& c : *run.cases)
      if (c.measured->name == name) return &c;
    return nullptr;
  }

  // The candidate time comparisons of `run` with `status`.
  static std::vector<const nlohmann::json*> flagged(const MemoryRun& run, const std::string& status) {
    std::vector<const nlohmann::json*> rows;
    if (!run.comparisons) return rows;
    for (const nlohmann::json& row : *run.comparisons)
      if (row["kind"] == "time" && row["impl"] == "candidate" && row["status"] == status)
        rows.push_back(&row);
    return rows;
  }

  // The newest judged run of each name on `gpu` whose case measured a
  // candidate, at commit `key` (`by_commit`) or on branch `key`.
  std::map<std::string, Baseline> find_baselines(const std::vector<std::string>& names,
                                                 std::int64_t project_id, const std::string& gpu,
                                                 bool by_commit, const std::string& key,
                                                 const std::string& reason) {
    std::map<std::string, Baseline> found;
    for (const std::string& name : names) {
      for (auto run = s_.runs.rbegin(); run != s_.runs.rend(); ++run) {
        const common::RunReport& report = run->report();
        if (run->project_id != project_id || run->gpu_model != gpu || !judged(*run) ||
            (by_commit ? report.commit : report.branch) != key)
          continue;
        const MemoryCase* c = case_named(*run, name);
        if (!c || !c->measured->candidate()) continue;
        found[name] = Baseline{
            run->id, report.commit, c->id,
            reason + " (run " + std::to_string(run->id) + ", commit " + report.commit.substr(0, 12) + ")"};
        break;
      }
    }
    return found;
  }

  std::map<std::string, Baseline> baselines_of(const std::vector<std::string>& names,
                                               const ProjectSettings& project, const std::string& gpu,
                                               const common::RunReport& report) {
    const std::string& main = project.default_branch;
    if (!report.base_commit)
      return find_baselines(names, project.id, gpu, false, main, "newest run on " + main + " on " + gpu);
    const std::string base = report.base_commit->substr(0, 12);
    std::map<std::string, Baseline> baselines = find_baselines(
        names, project.id, gpu, true, *report.base_commit, "base_commit " + base + " on " + gpu);
    std::vector<std::string> missing;
    for (const std::string& name : names)
      if (!baselines.contains(name)) missing.push_back(name);
    baselines.merge(find_baselines(missing, project.id, gpu, false, main,
                                   "base_commit " + base + " has no run of this case on " + gpu +
                                       "; newest run on " + main + " with samples"));
    return baselines;
  }

  // The head measurements of a stored case, as PostgreSQL reads them back
  // for judging: samples and clocks kept as real, nothing else but their
  // median and energy.
  std::vector<common::Measurement> stored_measurements(std::int64_t case_id) {
    for (const MemoryRun& run : s_.runs) {
      for (const MemoryCase& c : *run.cases) {
        if (c.id != case_id) continue;
        std::vector<common::Measurement> read;
        for (const common::Measurement& m : c.measured->measurements) {
          common::Measurement kept;
          kept.impl = m.impl;
          kept.median_ns = m.median_ns;
          for (double sample : m.samples_ns) kept.samples_ns.push_back(static_cast<float>(sample));
          kept.throttled_samples = m.throttled_samples;
          kept.replicates = m.replicates;
          for (double mhz : m.sm_mhz) kept.sm_mhz.push_back(static_cast<float>(mhz));
          kept.energy_j = m.energy_j;
          kept.replicate_location = m.replicate_location;
          read.push_back(std::move(kept));
        }
        return read;
      }
    }
    return {};
  }

  // Each name's newest 30 judged runs on the default branch and `gpu` under
  // the current rule that located its candidate, oldest first (not `exclude_run`).
  std::map<std::string, common::CaseHistory> history_of(const std::vector<std::string>& names,
                                                        const ProjectSettings& project,
                                                        const std::string& gpu, std::int64_t exclude_run) {
    std::map<std::string, common::CaseHistory> history;
    for (const std::string& name : names) {
      std::vector<std::pair<std::int64_t, common::CandidateSummary>> newest;
      for (auto run = s_.runs.rbegin(); run != s_.runs.rend() && newest.size() < kHistoryRuns; ++run) {
        if (run->project_id != project.id || run->gpu_model != gpu ||
            run->report().branch != project.default_branch || run->id == exclude_run || !judged(*run) ||
            run->rule_version != common::kRuleVersion)
          continue;
        const MemoryCase* c = case_named(*run, name);
        if (c && c->summary.candidate) newest.emplace_back(run->id, *c->summary.candidate);
      }
      common::CaseHistory& h = history[name];
      for (auto entry = newest.rbegin(); entry != newest.rend(); ++entry) {
        const common::CandidateSummary& at = entry->second;
        h.run_ids.push_back(entry->first);
        h.locations.push_back(at.location);
        h.replicate_counts.push_back(at.replicates);
        h.replicate_sds.push_back(at.replicate_sd.value_or(0));
        h.clocks.push_back(at.clock.mhz > 0
                               ? common::RunClock{at.clock.mhz, at.clock.sxx, at.clock.sxy, at.replicates}
                               : common::RunClock{});
      }
    }
    return history;
  }

  static Flags regressions_of(const MemoryRun& run) {
    Flags flags;
    if (!run.comparisons) return flags;
    for (const nlohmann::json& row : *run.comparisons) {
      if (row["impl"] != "candidate" || row["status"] != "regression") continue;
      flags[row["kind"].get<std::string>() + " " + row["case"].get<std::string>()] = {
          row["ratio"].get<double>(), row["upper"].get<double>(), row["threshold"].get<double>()};
    }
    return flags;
  }

  // The runs of the same change as `run` on its GPU model, newest first:
  // `from` the acknowledged ones whose acknowledgement may reach it, `to`
  // the unacknowledged regressions its acknowledgement may reach. The same
  // change: the same tree, or a merge on the default branch and the pull
  // request's commit it merges (a parent measured off it).
  std::vector<std::int64_t> same_change(const MemoryRun& run, Direction direction) {
    const std::string& main = s_.project(run.project_id).default_branch;
    std::vector<std::int64_t> runs;
    for (auto other = s_.runs.rbegin(); other != s_.runs.rend(); ++other) {
      if (other->project_id != run.project_id || other->gpu_model != run.gpu_model || other->id == run.id)
        continue;
      const MemoryRun& merge = direction == Direction::from ? run : *other;
      const MemoryRun& merged = direction == Direction::from ? *other : run;
      const nlohmann::json& tree = run.git("tree");
      const bool same_tree = tree.is_string() && tree == other->git("tree");
      std::vector<std::string> parents;
      if (merge.git("parents").is_array()) parents = merge.git("parents").get<std::vector<std::string>>();
      const bool merges = merge.report().branch == main && merged.report().branch != main &&
                          std::find(parents.begin(), parents.end(), merged.report().commit) != parents.end();
      const bool eligible = direction == Direction::from
                                ? other->acknowledgement.has_value()
                                : other->verdict == "regression" && !other->acknowledgement;
      if (eligible && (same_tree || merges)) runs.push_back(other->id);
    }
    return runs;
  }

  void carry(std::int64_t from, std::int64_t to) {
    const MemoryAcknowledgement& given = *s_.run(from)->acknowledgement;
    MemoryRun& run = *s_.run(to);
    run.verdict = "pass";
    run.acknowledgement = MemoryAcknowledgement{given.by, given.reason, from};
  }

  bool carry_acknowledgement(std::int64_t run_id) {
    const MemoryRun& run = *s_.run(run_id);
    const Flags flags = regressions_of(run);
    for (std::int64_t from : same_change(run, Direction::from)) {
      if (!common::acknowledgement_covers(regressions_of(*s_.run(from)), flags)) continue;
      carry(from, run_id);
      return true;
    }
    return false;
  }

  // The comparisons of the cases with ordinals [first, end) whose names match `name_like`.
  static nlohmann::json comparisons_in(const MemoryRun& run, std::int64_t first, std::int64_t end,
                                       const std::string& name_like) {
    nlohmann::json rows = nlohmann::json::array();
    if (!run.comparisons) return rows;
    std::map<std::string, std::int64_t> ordinal_of;
    for (const MemoryCase& c : *run.cases)
      ordinal_of.emplace(c.measured->name, static_cast<std::int64_t>(ordinal_of.size()));
    for (const nlohmann::json& row : *run.comparisons) {
      const std::int64_t ordinal = ordinal_of.at(row["case"]);
      if (ordinal >= first && ordinal < end && like_matches(row["case"], name_like)) rows.push_back(row);
    }
    return rows;
  }

  MemoryState& s_;
  InMemoryQueue queue_;
};

}  // namespace kw::server::testing
