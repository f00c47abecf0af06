#include "service/run_service.hpp"

#include <algorithm>

#include "errors.hpp"
#include "kw/common/run_report.hpp"
#include "service/judging.hpp"
#include "service/ownership.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

bool is_hex_prefix(const std::string& text) {
  return text.size() >= 7 && text.size() < 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The commit a client names in `field` (project_id 0: any project; only
// for a caller who may read every project).
std::string resolve_revision(RunTransaction& tx, std::int64_t project_id, const std::string& field,
                             const std::string& text) {
  if (text.empty())
    throw BadRequest("bad_query",
                     field + ": is required (a commit SHA, 7 or more of its first hex digits, or a branch)");
  if (common::is_commit_sha(text)) return text;
  if (is_hex_prefix(text)) {
    std::vector<std::string> commits = tx.measured_commits_with_prefix(project_id, text, 4);
    if (commits.size() == 1) return commits[0];
    if (commits.size() > 1) {
      std::string some;
      for (const std::string& commit : commits) some += (some.empty() ? "" : ", ") + commit.substr(0, 12);
      throw BadRequest("ambiguous_revision", field + ": " + text + " starts several measured commits (" +
                                                 some + "); give more digits");
    }
  }
  auto commit = tx.newest_commit_on_branch(project_id, text);
  if (!commit) throw NotFound("no_such_commit", field + ": no run of a commit or branch \"" + text + "\"");
  return *commit;
}

// The project a compare looks in: the one named, else the one a scoped
// token reaches; 0 (every project) only for a caller who may read them all,
// so no answer names a commit, branch or project the caller cannot read.
std::int64_t compare_project(RunTransaction& tx, const Caller* caller,
                             const std::optional<std::string>& project) {
  if (project) return owned_project(tx, caller, *project);
  if (!caller || !caller->projects) return 0;
  const std::vector<std::string>& reachable = *caller->projects;
  if (reachable.size() > 1)
    throw BadRequest("bad_query",
                     "project: is required (token \"" + caller->token_name + "\" reaches several projects)");
  return owned_project(tx, caller, reachable.front());
}

// The one project whose runs measured `head`, where the compare names none.
std::int64_t project_with_commit(RunTransaction& tx, const std::string& head) {
  std::vector<std::int64_t> projects = tx.projects_with_commit(head);
  if (projects.empty()) throw NotFound("no_such_commit", "no run of commit " + head);
  if (projects.size() > 1)
    throw BadRequest("bad_query", "commit " + head + " has runs in several projects; add project=");
  return projects.front();
}

}  // namespace

CheckedRunHead RunService::head(const Caller* caller, std::int64_t run_id, const Page& page) {
  return in_transaction(store_, [&](RunTransaction& tx) {
    owned_run(tx, caller, run_id);
    auto head = tx.run_head(run_id, page);
    if (!head) throw NotFound("no_such_run", "no run " + std::to_string(run_id));
    return CheckedRunHead{ReadableRun(run_id), std::move(*head)};
  });
}

std::string RunService::comparisons(const ReadableRun& run, std::int64_t first, std::int64_t end) {
  return in_transaction(store_,
                        [&](RunTransaction& tx) { return tx.run_comparisons_json(run.id(), first, end); });
}

std::string RunService::cases(const ReadableRun& run, std::int64_t first, std::int64_t end) {
  return in_transaction(store_, [&](RunTransaction& tx) { return tx.run_cases_json(run.id(), first, end); });
}

json RunService::explanation(const Caller* caller, std::int64_t run_id, const std::string& case_name) {
  return in_transaction(store_, [&](RunTransaction& tx) {
    owned_run(tx, caller, run_id);
    return tx.explanation(run_id, case_name);
  });
}

Acknowledgement RunService::acknowledge(const Caller& caller, std::int64_t run_id,
                                        const std::string& reason) {
  Acknowledgement answer;
  const std::string project = in_transaction(store_, [&](RunTransaction& tx) {
    std::string owner = owned_run(tx, &caller, run_id);
    auto acknowledged = tx.acknowledge(run_id, caller.token_name, reason);
    if (!acknowledged) throw NotFound("no_such_run", "no run " + std::to_string(run_id));
    if (acknowledged->previous_verdict != "regression") {
      throw Conflict("not_a_regression", "run " + std::to_string(run_id) + " has verdict " +
                                             acknowledged->previous_verdict +
                                             "; only a regression can be acknowledged");
    }
    tx.verdict_announced(run_id);
    for (std::int64_t carried : acknowledged->carried_to) tx.verdict_announced(carried);
    answer.carried_to = acknowledged->carried_to;
    return owner;
  });
  store_.committed(project);
  // The run's head (verdict, acknowledgement, stages), not its cases with every raw sample.
  answer.head = in_transaction(store_, [&](RunTransaction& tx) { return tx.run_head(run_id, Page{}); })->json;
  return answer;
}

json RunService::compare(const Caller* caller, const std::optional<std::string>& project,
                         const std::string& base_text, const std::string& head_text, const CaseFilter& filter,
                         const Page& page) {
  return in_transaction(store_, [&](RunTransaction& tx) {
    std::int64_t project_id = compare_project(tx, caller, project);
    const std::string head = resolve_revision(tx, project_id, "head", head_text);
    if (project_id == 0) project_id = project_with_commit(tx, head);
    const std::string base = resolve_revision(tx, project_id, "base", base_text);
    const ProjectSettings settings = tx.queue().project_settings(project_id);
    json gpus = json::array();
    for (const CommitRuns& runs : tx.commit_runs(project_id, base, head, filter.gpu_model)) {
      if (runs.base_in_job) {
        auto [judged, detection] = tx.judged_times(runs.head_run, filter.name_like);
        gpus.push_back(in_job_comparison(runs, std::move(judged), std::move(detection), filter, page));
      } else if (runs.base_run) {  // else nothing of the base measured on this GPU
        const CrossRunReads reads = tx.cross_run_reads(settings, runs, filter.name_like);
        gpus.push_back(cross_run_comparison(settings, runs, base, reads, filter, page));
      }
    }
    return json{{"project", settings.name}, {"base", base}, {"head", head}, {"gpus", gpus}};
  });
}

}  // namespace kw::server
