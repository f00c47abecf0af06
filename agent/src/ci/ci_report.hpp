// What `kw submit --wait` and `kw gate` tell a CI system besides their exit
// code: the verdict as Markdown, appended to a job summary file
// ($GITHUB_STEP_SUMMARY) and kept as one pull request comment (GitHub) or
// merge request note (GitLab) per project, edited in place on every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace kw::agent {

// How the gate writes numbers and log ends, on the console and in Markdown.
std::string fixed(double value, int digits);
// Three significant digits (1.04, 0.281, 1470): times and ratios everywhere,
// so a change of a few percent shows in the digits.
std::string sig3(double value);
std::string scientific(double value);  // two significant digits
std::string last_lines(const std::string& text, int lines);
// "by NAME: REASON", and where an acknowledgement was carried from another
// run of the same change, which run and why.
std::string acknowledgement_text(const nlohmann::json& acknowledgement);

// The run's `explanation` (GET /api/v1/runs/{id}/explanation, kept in the run
// JSON by the gate) of one case: what changed in its launches and build, a
// line each; empty where the server explains nothing.
std::vector<std::string> changes_of(const nlohmann::json& run, const std::string& case_name);

// A finished run (GET /api/v1/runs/{id}, every page): its verdict, the cases
// that regressed or improved, a failed stage's log end, and the link.
// A run's candidate comparisons by status, the flagged ones worst first
// (pointers into `run`): what the comment and kw gate both report.
struct CandidateRows {
  std::vector<const nlohmann::json*> regressed, improved, inconclusive, energy_regressed, energy_improved;
  int compared = 0;  // time comparisons with a baseline
};
CandidateRows candidate_rows(const nlohmann::json& run);

std::string verdict_markdown(const nlohmann::json& run, const std::string& link);
// A job that ended without a verdict (failed on the agents, timed out).
std::string no_verdict_markdown(const std::string& project, std::int64_t job_id, const std::string& why,
                                const std::string& link);

// Where the Markdown goes. Tokens come from the environment only, never the
// command line: GITHUB_TOKEN (or KW_GITHUB_TOKEN) and KW_GITLAB_TOKEN.
struct CiReportTargets {
  std::string summary_file;
  std::string github_pr;                   // "owner/name#N"
  std::string github_api;                  // default: GITHUB_API_URL, else https://api.github.com
  std::string gitlab_mr;                   // "PROJECT!IID": a project id or path, and the merge request's iid
  std::string gitlab_api;                  // default: CI_API_V4_URL
  std::string github_token, gitlab_token;  // from the environment, by resolve()

  void add_to(CLI::App& command);
  // Checks the targets' forms and fills the defaults; throws CLI::ValidationError.
  void resolve();
  bool posts() const { return !github_pr.empty() || !gitlab_mr.empty(); }
};

// Appends to the summary file and creates or edits the comment and the note.
// A target that fails is reported on stdout and does not change the verdict.
void publish(const CiReportTargets& targets, const std::string& project, const std::string& markdown);

}  // namespace kw::agent
