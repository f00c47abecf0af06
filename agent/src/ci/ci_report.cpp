#include "ci/ci_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "client/server_api.hpp"
#include "host/process.hpp"
#include "kw/common/judge.hpp"
#include "kw/http/client.hpp"
#include "pipeline/profile_summary.hpp"

namespace kw::agent {

namespace {

using nlohmann::json;

// Rows per table: the rest is on the run page (GitHub refuses comments over 65536 characters).
constexpr std::size_t kMaxRows = 30;

// Table cells hold case names and messages: no pipe may end a cell early.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string marker(const std::string& project) {
  return "<!-- kernelwatch:" + project + " -->";
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The smallest slowdown a comparison's test flags nine times in ten ("0.8%").
std::string detectable_text(const json& c) {
  const json& d = c.contains("detectable") ? c["detectable"] : json();
  return d.is_number() ? fixed(100 * d.get<double>(), d.get<double>() < 0.1 ? 1 : 0) + "%" : "-";
}

// What the gate can see in this run: the median case's smallest detectable
// slowdown, and the cases that cannot see their own threshold.
std::string detectable_markdown(const json& run) {
  std::vector<double> sizes;
  std::vector<std::pair<double, const json*>> blind;
  for (const json& c : run["comparisons"]) {
    if (c["impl"] != "candidate" || c["kind"] != "time" || !c.contains("detectable") ||
        !c["detectable"].is_number())
      continue;
    const double d = c["detectable"].get<double>();
    sizes.push_back(d);
    if (c["threshold"].is_number() && d > c["threshold"].get<double>()) blind.emplace_back(d, &c);
  }
  if (sizes.empty()) return {};
  std::nth_element(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(sizes.size() / 2), sizes.end());
  std::string text = " The gate sees slowdowns of " + fixed(100 * sizes[sizes.size() / 2], 1) +
                     "% or more on the median case (nine times in ten).";
  if (blind.empty()) return text;
  std::sort(blind.begin(), blind.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  text += " " + std::to_string(blind.size()) + " case(s) cannot see their threshold:";
  for (std::size_t i = 0; i < blind.size() && i < 5; ++i)
    text += (i ? ", `" : " `") + cell((*blind[i].second)["case"].get<std::string>()) + "` sees " +
            detectable_text(*blind[i].second) + " against " +
            fixed(100 * (*blind[i].second)["threshold"].get<double>(), 1) + "%";
  return text + (blind.size() > 5 ? ", ..." : "") + ".";
}

// `shared_baseline`: the rows share one baseline, said once above the
// tables; otherwise each row names its own.
// What a pull request's case changed from its base (why it was timed), in a
// cell: its first two differences.
std::string changed_text(const json& c) {
  const json& changed = c.contains("changed") ? c["changed"] : json();
  if (!changed.is_array() || changed.empty()) return "–";
  std::string text;
  for (std::size_t i = 0; i < changed.size() && i < 2; ++i)
    text += (i ? "; " : "") + (changed[i].is_string() ? changed[i].get<std::string>() : changed[i].dump());
  if (changed.size() > 2) text += "; and " + std::to_string(changed.size() - 2) + " more";
  return cell(text);
}

std::string comparison_table(const std::vector<const json*>& rows, const std::string& title,
                             bool shared_baseline, const std::string& metric = "time") {
  if (rows.empty()) return {};
  // A pull request's rows say what each case changed from its base.
  const bool changed = std::any_of(rows.begin(), rows.end(), [](const json* c) {
    return c->contains("changed") && (*c)["changed"].is_array() && !(*c)["changed"].empty();
  });
  std::string text = "\n**" + title + "** (" + std::to_string(rows.size()) + ")\n\n" + "| case | " + metric +
                     " vs baseline | 99% interval | p | threshold | sees |" +
                     (shared_baseline ? "" : " baseline |") + (changed ? " changed from the base |" : "") +
                     "\n|---|---:|---:|---:|---:|---:|" + (shared_baseline ? "" : "---|") +
                     (changed ? "---|" : "") + "\n";
  for (std::size_t i = 0; i < rows.size() && i < kMaxRows; ++i) {
    const json& c = *rows[i];
    text += "| `" + cell(c["case"].get<std::string>()) + "` | " + sig3(c["ratio"]) + "x | " +
            sig3(c["lower"]) + "-" + sig3(c["upper"]) + " | " + scientific(c["p_value"]) + " | " +
            fixed(100 * c["threshold"].get<double>(), 1) + "% | " + detectable_text(c) + " |" +
            (shared_baseline ? "" : " " + cell(c.value("baseline_reason", std::string())) + " |") +
            (changed ? " " + changed_text(c) + " |" : "") + "\n";
  }
  if (rows.size() > kMaxRows)
    text += "\n... and " + std::to_string(rows.size() - kMaxRows) + " more on the run page\n";
  return text;
}

std::string log_end(const json& stage) {
  std::string tail = last_lines(stage.value("log_tail", ""), 25);
  if (tail.empty()) return {};
  // A fence inside the log must not close ours.
  for (std::size_t at = tail.find("```"); at != std::string::npos; at = tail.find("```", at + 4))
    tail.replace(at, 3, "`\u200b``");
  return "\n<details><summary>end of the " + stage.value("name", std::string()) + " log</summary>\n\n```\n" +
         tail + "\n```\n</details>\n";
}

// One comment or note per project, found by its hidden marker and edited;
// created when there is none.
struct Thread {
  std::string list;    // GET, one page at a time (&page=N appended)
  std::string create;  // POST {"body"}
  std::string update;  // + id: PATCH (GitHub) / PUT (GitLab) {"body"}
  std::string update_method;
  std::map<std::string, std::string> headers;
};

std::string upsert(http::Client& client, const Thread& thread, const std::string& project,
                   const std::string& markdown) {
  const std::string wanted = marker(project);
  const std::string body = json{{"body", markdown}}.dump();
  for (int page = 1; page <= 50; ++page) {
    http::Response listed =
        client.request("GET", thread.list + "&page=" + std::to_string(page), {}, thread.headers);
    if (listed.status != 200)
      throw std::runtime_error("listing comments: HTTP " + std::to_string(listed.status) + ": " +
                               listed.body.substr(0, 300));
    json comments = listed.json();
    if (!comments.is_array()) throw std::runtime_error("listing comments: not a JSON array");
    for (const json& comment : comments) {
      if (!comment.contains("body") || !comment["body"].is_string() ||
          comment["body"].get<std::string>().find(wanted) == std::string::npos)
        continue;
      const std::string id = comment["id"].dump();
      http::Response updated = client.request(thread.update_method, thread.update + id, body, thread.headers);
      if (updated.status != 200)
        throw std::runtime_error("editing comment " + id + ": HTTP " + std::to_string(updated.status) + ": " +
                                 updated.body.substr(0, 300));
      return "edited comment " + id;
    }
    if (comments.size() < 100) break;
  }
  http::Response created = client.request("POST", thread.create, body, thread.headers);
  if (created.status != 201)
    throw std::runtime_error("creating a comment: HTTP " + std::to_string(created.status) + ": " +
                             created.body.substr(0, 300));
  return "created comment " + created.json()["id"].dump();
}

}  // namespace

std::string fixed(double value, int digits) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

std::string sig3(double value) {
  char buffer[32];
  const double magnitude = value == 0 ? 0 : std::floor(std::log10(std::fabs(value)));
  const int decimals = static_cast<int>(std::clamp(2.0 - magnitude, 0.0, 12.0));
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, value);
  return buffer;
}

std::string scientific(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2g", value);
  return buffer;
}

std::string last_lines(const std::string& text, int lines) {
  std::size_t start = text.size();
  for (int line = 0; line < lines && start > 0; ++line) {
    std::size_t newline = text.rfind('\n', start - 1);
    start = newline == std::string::npos ? 0 : newline;
  }
  return text.substr(start == 0 ? 0 : start + 1);
}

std::string acknowledgement_text(const json& acknowledgement) {
  std::string text = "by " + acknowledgement.value("by", std::string()) + ": " +
                     acknowledgement.value("reason", std::string());
  const json& from = acknowledgement.contains("carried_from") ? acknowledgement["carried_from"] : json();
  if (from.is_object()) {
    text += " (carried from run " + std::to_string(from.value("run_id", 0)) + " of " +
            from.value("commit", std::string()).substr(0, 12) + " on " + from.value("branch", std::string()) +
            (from.value("same_tree", false) ? ", the same tree)" : ", which this commit merges)");
  }
  return text;
}

std::vector<std::string> changes_of(const json& run, const std::string& case_name) {
  std::vector<std::string> lines;
  if (!run.contains("explanation")) return lines;
  for (const json& c : run["explanation"]) {
    if (c.value("case", std::string()) != case_name) continue;
    for (const json& line : c.value("changes", json::array())) lines.push_back(line.get<std::string>());
  }
  return lines;
}

// The run's Nsight Compute profiles (`profiles` as GET
// /api/v1/runs/{id}/profiles gives them): a done one's table folded under
// its headline, with links to the raw CSVs; the others' state.
namespace {

// The cases whose code is identical to the base's (their fingerprints), not
// timed, and the audit of them.
std::string identical_code_text(const json& run) {
  const json& f =
      run.contains("fingerprints") && run["fingerprints"].is_object() ? run["fingerprints"] : json();
  const std::int64_t identical = f.is_object() ? f.value("identical_to_base", std::int64_t{0}) : 0;
  const std::int64_t audited = f.is_object() ? f.value("audited", std::int64_t{0}) : 0;
  if (identical == 0 && audited == 0) return {};
  std::string text = " " + std::to_string(identical) + " ran code identical to the base's and were not timed";
  if (audited > 0)
    text += "; " + std::to_string(audited) + " more identical ones were timed as an audit, " +
            std::to_string(f.value("audit_misses", std::int64_t{0})) + " of them flagged";
  return text + ".";
}

}  // namespace

std::string profiles_markdown(const json& run, const std::string& server) {
  if (!run.contains("profiles") || !run["profiles"].is_array()) return {};
  std::string text;
  for (const json& p : run["profiles"]) {
    if (!p.contains("summary")) continue;  // the run's short list, not the profiles
    const std::string name = "`" + cell(p.value("case", std::string())) + "`";
    const std::string state = p.value("state", std::string());
    if (state == "done" && p["summary"].is_object()) {
      const std::string csv = server + api_target::profile_csv(p["id"].get<std::int64_t>());
      text.append("\n<details><summary>Nsight Compute profile of ")
          .append(name)
          .append(": ")
          .append(cell(profile_headline(p["summary"])))
          .append("</summary>\n\n")
          .append(profile_markdown(p["summary"]))
          .append("\nRaw ncu CSV: ");
      if (p["summary"].contains("base")) text.append("[base](").append(csv).append("base) · ");
      text.append("[head](").append(csv).append("head)\n</details>\n");
    } else if (state == "failed" || state == "cancelled") {
      text.append("\nNsight Compute profile of ")
          .append(name)
          .append(" ")
          .append(state)
          .append(": ")
          .append(cell(p["error"].is_string() ? p["error"].get<std::string>() : std::string("?")))
          .append("\n");
    } else {
      text.append("\nNsight Compute profile of ")
          .append(name)
          .append(": ")
          .append(state)
          .append(" (job ")
          .append(p["job_id"].dump())
          .append("); it will be on the run page.\n");
    }
  }
  return text;
}

CandidateRows candidate_rows(const json& run) {
  CandidateRows rows;
  for (const json& c : run["comparisons"]) {
    if (c["impl"] != "candidate") continue;
    const std::string status = c.value("status", std::string());
    if (c["kind"] == "energy") {
      if (status == "regression") rows.energy_regressed.push_back(&c);
      if (status == "improvement") rows.energy_improved.push_back(&c);
      continue;
    }
    if (c["kind"] != "time") continue;
    rows.compared += status != "no-baseline";
    if (status == "regression") rows.regressed.push_back(&c);
    if (status == "improvement") rows.improved.push_back(&c);
    if (status == "inconclusive") rows.inconclusive.push_back(&c);
  }
  auto by_ratio = [](std::vector<const json*>& list, bool largest_first) {
    std::sort(list.begin(), list.end(), [largest_first](const json* a, const json* b) {
      const double x = (*a)["ratio"].get<double>(), y = (*b)["ratio"].get<double>();
      return largest_first ? x > y : x < y;
    });
  };
  by_ratio(rows.regressed, true);
  by_ratio(rows.improved, false);
  by_ratio(rows.energy_regressed, true);
  return rows;
}

namespace {

std::string failed_markdown(const json& run) {
  std::string text;
  for (const json& stage : run["stages"]) {
    if (stage["status"] != "failed") continue;
    text += "\nStage **" + stage["name"].get<std::string>() +
            "** failed: " + cell(stage.value("message", std::string())) + "\n" + log_end(stage);
  }
  for (const json& c : run["cases"]) {
    if (c.contains("correctness") && c["correctness"].is_object() && !c["correctness"].value("passed", true))
      text += "\nCorrectness of `" + cell(c["name"].get<std::string>()) + "`: relative L2 error " +
              scientific(c["correctness"]["rel_l2_err"]) + " > tolerance " +
              scientific(c["correctness"]["tolerance"]) + "\n";
  }
  return text;
}

std::string no_data_markdown(const json& run) {
  const int braked = run.contains("detection") && run["detection"].is_object()
                         ? run["detection"].value("throttled_out", 0)
                         : 0;
  std::string text = braked > 0
                         ? "\nThe GPU throttled through most samples of all " + std::to_string(braked) +
                               " case(s), so nothing can be judged: the GPU needs attention.\n"
                         : "\nNo case was measured, so nothing can be judged.\n";
  for (const json& stage : run["stages"]) {
    if (stage["status"] == "skipped")
      text += "\nStage " + stage["name"].get<std::string>() +
              " skipped: " + cell(stage.value("message", std::string())) + "\n";
  }
  return text;
}

// What changed in the launches and build of each flagged case.
std::string changes_markdown(const json& run, const CandidateRows& candidates) {
  std::string changed;
  for (const auto* rows : {&candidates.regressed, &candidates.improved}) {
    for (const json* c : *rows) {
      std::vector<std::string> lines = changes_of(run, (*c)["case"].get<std::string>());
      if (lines.empty()) continue;
      changed += "- `" + cell((*c)["case"].get<std::string>()) + "`:";
      for (std::size_t i = 0; i < lines.size(); ++i) changed += (i ? "; " : " ") + cell(lines[i]);
      changed += "\n";
    }
  }
  return changed.empty() ? changed
                         : "\n**What changed** (launches and build, against the baseline run)\n\n" + changed;
}

std::string judged_markdown(const json& run, const CandidateRows& candidates, const std::string& link) {
  const auto& [regressed, improved, inconclusive, energy_regressed, energy_improved, compared] = candidates;
  std::string text;
  if (run["acknowledgement"].is_object())
    text += "\nAcknowledged " + cell(acknowledgement_text(run["acknowledgement"])) + "\n";
  std::set<std::string> baselines;
  for (const auto* rows : {&regressed, &improved})
    for (const json* c : *rows) baselines.insert(c->value("baseline_reason", std::string()));
  text +=
      "\n" + std::to_string(run["cases"].size()) + " cases, " + std::to_string(compared) +
      " compared with a baseline: " + std::to_string(regressed.size()) + " slower, " +
      std::to_string(improved.size()) + " faster" +
      (inconclusive.empty() ? std::string()
                            : ", " + std::to_string(inconclusive.size()) +
                                  " inconclusive (moved past the threshold; the interval holds no change)") +
      ".";
  if (baselines.size() == 1) text += " Baseline: " + cell(*baselines.begin()) + ".";
  text += detectable_markdown(run);
  text += identical_code_text(run);
  text += "\n" + comparison_table(regressed, "Regressed", baselines.size() == 1) +
          comparison_table(improved, "Improved", baselines.size() == 1) +
          comparison_table(inconclusive, "Inconclusive: a re-run with more replicates decides", false) +
          comparison_table(energy_regressed, "More energy (joules per iteration)", false, "energy") +
          comparison_table(energy_improved, "Less energy (joules per iteration)", false, "energy");
  text += changes_markdown(run, candidates);
  return text + profiles_markdown(run, link.substr(0, link.find("/#/")));
}

}  // namespace

std::string verdict_markdown(const json& run, const std::string& link) {
  const std::string project = run.value("project", std::string());
  const std::string verdict = run.value("verdict", std::string());
  const std::string gpu = run["gpu_model"].is_string() ? run["gpu_model"].get<std::string>() : "none";
  const std::string where = "`" + run["commit"].get<std::string>().substr(0, 12) + "`" +
                            (gpu == "none" ? std::string() : " on " + gpu);
  const bool acknowledged = run["acknowledgement"].is_object();
  const CandidateRows candidates = candidate_rows(run);
  const std::string headline =
      verdict == "regression"    ? ":x: regression"
      : verdict == "failed"      ? ":x: preflight failed"
      : verdict == "no-data"     ? ":warning: no data"
      : acknowledged             ? ":white_check_mark: pass (regression acknowledged)"
      : verdict == "improvement" ? ":rocket: improvement"
      : candidates.compared == 0 ? ":white_check_mark: pass (no baseline yet)"
      : !candidates.inconclusive.empty()
          ? ":white_check_mark: pass, " + std::to_string(candidates.inconclusive.size()) + " inconclusive"
          : ":white_check_mark: pass";
  std::string text =
      marker(project) + "\n### kernelwatch " + project + ": " + headline + " for " + where + "\n";
  if (const std::string gate = common::inconclusive_gate_text(run.value("detection", json())); !gate.empty())
    text += "\n**" + cell(gate) + "**\n";
  text += verdict == "failed"    ? failed_markdown(run)
          : verdict == "no-data" ? no_data_markdown(run)
                                 : judged_markdown(run, candidates, link);
  text += "\n[Run " + std::to_string(run["id"].get<std::int64_t>()) + "](" + link + ")";
  if (verdict == "regression" && !acknowledged)
    text +=
        " · intended? `kw ack --run " + std::to_string(run["id"].get<std::int64_t>()) + " --reason \"...\"`";
  return text + "\n";
}

std::string no_verdict_markdown(const std::string& project, std::int64_t job_id, const std::string& why,
                                const std::string& link) {
  return marker(project) + "\n### kernelwatch " + project + ": :warning: no verdict\n\nJob " +
         std::to_string(job_id) + ": " + cell(why) + "\n\n[Job " + std::to_string(job_id) + "](" + link +
         ")\n";
}

void CiReportTargets::add_to(CLI::App& command) {
  command.add_option("--summary", summary_file,
                     "append the verdict as Markdown to this file (GitHub: \"$GITHUB_STEP_SUMMARY\")");
  command.add_option(
      "--github-comment", github_pr,
      "OWNER/NAME#PR: keep the verdict as one comment on that pull request (token: GITHUB_TOKEN)");
  command.add_option("--github-api", github_api,
                     "GitHub REST API URL (default: GITHUB_API_URL or api.github.com)");
  command.add_option(
      "--gitlab-note", gitlab_mr,
      "PROJECT!IID: keep the verdict as one note on that merge request (token: KW_GITLAB_TOKEN)");
  command.add_option("--gitlab-api", gitlab_api, "GitLab API v4 URL (default: CI_API_V4_URL)");
}

void CiReportTargets::resolve() {
  if (!github_pr.empty()) {
    if (!std::regex_match(github_pr, std::regex(R"([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#[1-9][0-9]*)")))
      throw CLI::ValidationError("--github-comment", "expected OWNER/NAME#NUMBER, got " + github_pr);
    if (github_api.empty()) github_api = env("GITHUB_API_URL");
    if (github_api.empty()) github_api = "https://api.github.com";
    github_token = env("GITHUB_TOKEN");
    if (github_token.empty()) github_token = env("KW_GITHUB_TOKEN");
    if (github_token.empty())
      throw CLI::ValidationError("--github-comment",
                                 "needs GITHUB_TOKEN (or KW_GITHUB_TOKEN) in the environment");
  }
  if (!gitlab_mr.empty()) {
    if (!std::regex_match(gitlab_mr, std::regex(R"([^!]+![1-9][0-9]*)")))
      throw CLI::ValidationError("--gitlab-note", "expected PROJECT!IID (e.g. 42!7), got " + gitlab_mr);
    if (gitlab_api.empty()) gitlab_api = env("CI_API_V4_URL");
    if (gitlab_api.empty())
      throw CLI::ValidationError("--gitlab-note", "needs --gitlab-api or CI_API_V4_URL");
    gitlab_token = env("KW_GITLAB_TOKEN");
    if (gitlab_token.empty())
      throw CLI::ValidationError("--gitlab-note",
                                 "needs KW_GITLAB_TOKEN (a token with the api scope) in the environment");
  }
}

void publish(const CiReportTargets& targets, const std::string& project, const std::string& markdown) {
  if (!targets.summary_file.empty()) {
    std::ofstream out(targets.summary_file, std::ios::app);
    out << markdown << "\n";
    if (!out) std::cout << "kernelwatch: could not append the summary to " << targets.summary_file << "\n";
  }
  if (!targets.github_pr.empty()) {
    const auto hash = targets.github_pr.find('#');
    const std::string repo = targets.github_pr.substr(0, hash), number = targets.github_pr.substr(hash + 1);
    try {
      http::Client github(targets.github_api, targets.github_token);
      Thread thread{"/repos/" + repo + "/issues/" + number + "/comments?per_page=100",
                    "/repos/" + repo + "/issues/" + number + "/comments",
                    "/repos/" + repo + "/issues/comments/",
                    "PATCH",
                    {{"Accept", "application/vnd.github+json"}, {"X-GitHub-Api-Version", "2022-11-28"}}};
      say("pull request " + targets.github_pr + ": " + upsert(github, thread, project, markdown));
    } catch (const std::exception& error) {
      std::cout << "kernelwatch: could not comment on pull request " << targets.github_pr << ": "
                << error.what() << "\n";
    }
  }
  if (!targets.gitlab_mr.empty()) {
    const auto bang = targets.gitlab_mr.find('!');
    const std::string base = "/projects/" + http::url_encode(targets.gitlab_mr.substr(0, bang)) +
                             "/merge_requests/" + targets.gitlab_mr.substr(bang + 1) + "/notes";
    try {
      http::Client gitlab(targets.gitlab_api);
      Thread thread{base + "?per_page=100&sort=asc&order_by=created_at",
                    base,
                    base + "/",
                    "PUT",
                    {{"PRIVATE-TOKEN", targets.gitlab_token}}};
      say("merge request " + targets.gitlab_mr + ": " + upsert(gitlab, thread, project, markdown));
    } catch (const std::exception& error) {
      std::cout << "kernelwatch: could not add a note to merge request " << targets.gitlab_mr << ": "
                << error.what() << "\n";
    }
  }
}

}  // namespace kw::agent
