// kw submit / kw gate: the CI side. Queue a commit, wait for its verdict, and
// exit with a code a required status check can use:
//   0 pass, improvement or acknowledged regression; 1 regression;
//   2 preflight or correctness failure; 3 infrastructure error, timeout, or
//   no case measured (verdict no-data).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "ci/ci_report.hpp"
#include "cli/commands.hpp"
#include "client/server_api.hpp"
#include "kw/common/judge.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/shards.hpp"
#include "kw/http/client.hpp"
#include "pipeline/profile_summary.hpp"
#include "project/git.hpp"

namespace kw::agent {

namespace {

using nlohmann::json;

double parse_duration(const std::string& text, const std::string& option, bool zero_allowed = false) {
  if (text.empty()) throw CLI::ValidationError(option, "is empty");
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw CLI::ValidationError(option, "expected e.g. 90s, 30m or 2h, got " + text);
  }
  std::string unit = text.substr(used);
  double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (scale < 0 || value < 0 || (value == 0 && !zero_allowed))
    throw CLI::ValidationError(option, "expected e.g. 90s, 30m or 2h, got " + text);
  return value * scale;
}

// The whole run: its cases and comparisons come a page at a time.
json fetch_run(http::Client& client, std::int64_t run_id) {
  ServerApi api(client);
  json run = api.run_page(run_id, 1).json();
  for (int page = 2; page <= run["paging"].value("pages", 1); ++page) {
    json more = api.run_page(run_id, page).json();
    for (const char* key : {"cases", "comparisons"}) {
      for (json& item : more[key]) run[key].push_back(std::move(item));
    }
  }
  return run;
}

// What changed in the flagged cases (the server's explanation), kept in the
// run as `explanation`; a server without it leaves the run as it was.
void add_explanation(http::Client& client, json& run) {
  bool flagged = false;
  for (const json& c : run["comparisons"])
    flagged = flagged ||
              (c["impl"] == "candidate" && (c["status"] == "regression" || c["status"] == "improvement"));
  if (!flagged) return;
  http::Response response = ServerApi(client).explanation(run["id"].get<std::int64_t>());
  if (response.status == 200) run["explanation"] = response.json().value("cases", json::array());
}

// The run's Nsight Compute profiles in full (GET /api/v1/runs/{id}/profiles)
// as `profiles`. A regression's profile that is queued or running is waited
// for up to `wait_s`, so the comment can say why the case got slower.
void add_profiles(http::Client& client, json& run, double wait_s) {
  if (!run.contains("profiles") || !run["profiles"].is_array() || run["profiles"].empty()) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  std::string said;
  while (true) {
    http::Response response = ServerApi(client).profiles(run["id"].get<std::int64_t>());
    if (response.status != 200) return;
    json profiles = response.json();
    const json* pending = nullptr;
    for (const json& p : profiles) {
      if (p["state"] == "queued" || p["state"] == "running") pending = &p;
    }
    if (pending == nullptr || run["verdict"] != "regression" || stop_requested() ||
        std::chrono::steady_clock::now() >= deadline) {
      run["profiles"] = std::move(profiles);
      return;
    }
    const std::string line = "waiting up to " + std::to_string(static_cast<long>(wait_s)) +
                             " s for the Nsight Compute profile of " + (*pending)["case"].get<std::string>() +
                             " (job " + (*pending)["job_id"].dump() + ", " +
                             (*pending)["state"].get<std::string>() + ")";
    if (line != said) say(line);
    said = line;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// A failed stage's last log lines: the compiler's or the bench's own words.
void print_log_end(const json& stage) {
  const std::string tail = stage.value("log_tail", "");
  if (tail.empty()) return;
  std::cout << "  --- end of its log\n" << last_lines(tail, 25) << "\n";
}

// The exit code, and the verdict as Markdown for the CI system.
struct GateOutcome {
  int exit_code = kExitInfrastructure;
  std::string project;
  std::string markdown;
};

// The cases that moved past their threshold without the evidence to flag
// them: never called unchanged.
void print_inconclusive(const std::vector<const json*>& inconclusive) {
  for (const json* c : inconclusive) {
    std::cout << "  inconclusive " << (*c)["case"].get<std::string>() << ": " << sig3((*c)["ratio"])
              << "x (99% interval " << sig3((*c)["lower"]) << "-" << sig3((*c)["upper"]) << ", threshold "
              << fixed(100 * (*c)["threshold"].get<double>(), 1)
              << "%): a re-run with more replicates decides\n";
  }
}

int print_no_data(const json& run, const std::string& where, const std::string& link) {
  const int braked = run.contains("detection") && run["detection"].is_object()
                         ? run["detection"].value("throttled_out", 0)
                         : 0;
  if (const std::string gate = common::inconclusive_gate_text(run.value("detection", json()));
      !gate.empty()) {
    std::cout << "kernelwatch: NO VERDICT for " << where << ": " << gate << "\n";
    print_inconclusive(candidate_rows(run).inconclusive);
  } else if (braked > 0) {
    std::cout << "kernelwatch: NO DATA for " << where << ": the GPU throttled through most samples of all "
              << braked << " case(s), so nothing can be judged; the GPU needs attention\n";
  } else {
    std::cout << "kernelwatch: NO DATA for " << where << ": no case was measured, so nothing can be judged\n";
  }
  for (const json& stage : run["stages"]) {
    if (stage["status"] == "skipped")
      std::cout << "  stage " << stage["name"].get<std::string>()
                << " skipped: " << stage["message"].get<std::string>() << "\n";
  }
  std::cout << "  " << link << "\n";
  return kExitInfrastructure;
}

int print_preflight_failure(const json& run, const std::string& where, const std::string& link,
                            const std::map<std::string, std::string>& shown) {
  std::cout << "kernelwatch: PREFLIGHT FAILED for " << where << "\n";
  for (const json& stage : run["stages"]) {
    if (stage["status"] != "failed") continue;
    const std::string name = stage["name"];
    std::cout << "  stage " << name << ": " << stage["message"].get<std::string>() << "\n";
    if (auto seen = shown.find(name); seen == shown.end() || seen->second != "failed") print_log_end(stage);
  }
  for (const json& c : run["cases"]) {
    if (c.contains("correctness") && c["correctness"].is_object() &&
        !c["correctness"].value("passed", true)) {
      std::cout << "  correctness " << c["name"].get<std::string>() << ": rel L2 error "
                << scientific(c["correctness"]["rel_l2_err"]) << " > tolerance "
                << scientific(c["correctness"]["tolerance"]) << "\n";
    }
  }
  std::cout << "  " << link << "\n";
  return kExitPreflight;
}

int print_regression(const json& run, const std::string& where, const std::string& link) {
  std::cout << "kernelwatch: REGRESSION in " << where << "\n";
  if (const std::string gate = common::inconclusive_gate_text(run.value("detection", json())); !gate.empty())
    std::cout << "  " << gate << "\n";
  for (const json& c : run["comparisons"]) {
    if (c["status"] != "regression" || c["kind"] != "time" || c["impl"] != "candidate") continue;
    std::cout << "  " << c["case"].get<std::string>() << ": " << sig3(c["ratio"]) << "x the time of "
              << c["baseline_reason"].get<std::string>() << " (99% interval " << sig3(c["lower"]) << "-"
              << sig3(c["upper"]) << ", p = " << scientific(c["p_value"]) << ", threshold "
              << fixed(100 * c["threshold"].get<double>(), 1) << "%)\n";
    for (const std::string& line : changes_of(run, c["case"])) std::cout << "    changed: " << line << "\n";
  }
  for (const json& p : run.value("profiles", json::array())) {
    if (p.value("state", std::string()) == "done" && p.contains("summary"))
      std::cout << "  profiled " << p["case"].get<std::string>()
                << " under Nsight Compute: " << profile_headline(p["summary"]) << "\n";
  }
  print_inconclusive(candidate_rows(run).inconclusive);
  std::cout << "  " << link << "\n"
            << "  intended? acknowledge it: kw ack --run " << run["id"].get<std::int64_t>()
            << " --reason \"...\"\n";
  if (run.contains("bisect") && run["bisect"].is_object())
    std::cout << "  bisecting the " << run["bisect"]["commits"].get<int>() << " pushed commits for the one "
              << "that brought it: bisect " << run["bisect"]["id"].get<std::int64_t>() << "\n";
  return kExitRegression;
}

int print_pass(const json& run, const std::string& where, const std::string& link) {
  const std::string verdict = run["verdict"];
  if (run["acknowledgement"].is_object()) {
    std::cout << "kernelwatch: pass for " << where << " (regression acknowledged "
              << acknowledgement_text(run["acknowledgement"]) << ")\n";
  } else {
    const CandidateRows rows = candidate_rows(run);
    const int compared = rows.compared;
    const auto improved = rows.improved.size(), inconclusive = rows.inconclusive.size();
    // Nothing compared: a pass, but not one that says the change is fine.
    if (compared == 0) {
      std::cout << "kernelwatch: pass (no baseline yet) for " << where << " (" << run["cases"].size()
                << " cases measured, none compared: the first run of these cases on this GPU model, or its "
                   "base was never measured)\n";
    } else {
      std::cout << "kernelwatch: " << (verdict == "improvement" ? "IMPROVEMENT" : "pass") << " for " << where
                << " (" << run["cases"].size() << " cases, " << compared << " compared with a baseline, "
                << improved << " faster"
                << (inconclusive > 0 ? ", " + std::to_string(inconclusive) + " inconclusive" : std::string())
                << ")\n";
      print_inconclusive(rows.inconclusive);
    }
  }
  std::cout << "  " << link << "\n";
  return kExitOk;
}

// Prints the verdict's summary; returns the exit code. `shown`: the stages'
// states already printed as the job ran (a failed stage's log is printed
// here when it was not).
int summarize(const json& run, const std::string& link, const std::map<std::string, std::string>& shown) {
  const std::string verdict = run["verdict"];
  // A run that measured nothing (a failed build) has no device: "none".
  const std::string gpu = run.value("gpu_model", std::string("none"));
  const std::string where =
      run["commit"].get<std::string>().substr(0, 12) + (gpu == "none" ? "" : " on " + gpu);
  if (verdict == "no-data") return print_no_data(run, where, link);
  if (verdict == "failed") return print_preflight_failure(run, where, link, shown);
  if (verdict == "regression") return print_regression(run, where, link);
  return print_pass(run, where, link);
}

// The stages the agent streamed since the last poll, as they start and end;
// a failed one with the end of its log, the moment it fails. `who` names
// the shard ("shard 2/4 ") of a sharded job.
void print_new_stages(const json& stages, const std::string& who, std::map<std::string, std::string>& shown) {
  if (!stages.is_array()) return;
  for (const json& stage : stages) {
    const std::string name = stage.value("name", ""), status = stage.value("status", "");
    std::string& last = shown[who + name];
    if (last == status) continue;
    last = status;
    std::string line = "  " + who + "stage " + name + " " + (status == "failed" ? "FAILED" : status);
    if ((status == "passed" || status == "failed") && stage["duration_ms"].is_number()) {
      char seconds[32];
      std::snprintf(seconds, sizeof(seconds), " in %.1f s", stage["duration_ms"].get<double>() / 1000);
      line += seconds;
    }
    const std::string message = stage.value("message", "");
    if (status != "started" && status != "passed" && !message.empty()) line += ": " + message;
    std::cout << line << "\n";
    if (status == "failed") print_log_end(stage);
    std::cout.flush();
  }
}

// A job's stages, or each of its shards' (a job split over several GPUs).
void print_new_stages(const json& job, std::map<std::string, std::string>& shown) {
  print_new_stages(job.value("stages", json()), "", shown);
  const json shards = job.value("shard_jobs", json());
  if (!shards.is_array()) return;
  for (const json& shard : shards) {
    const std::string who =
        "shard " + shard.value("index", json()).dump() + "/" + std::to_string(shards.size()) + " ";
    print_new_stages(shard.value("stages", json()), who, shown);
  }
}

GateOutcome no_verdict(const json& job, std::int64_t job_id, const std::string& server,
                       const std::string& why) {
  const std::string project = job.value("project", std::string());
  return {kExitInfrastructure, project,
          no_verdict_markdown(project, job_id, why, server + "/#/job/" + std::to_string(job_id))};
}

// `said`: the job's state as the caller already printed it (kw submit), so
// it is not said twice; progress is printed when the state or agent changes,
// and every 30 s.
GateOutcome wait_and_gate(http::Client& client, const std::string& server, std::int64_t job_id,
                          double timeout_s, double profile_wait_s, std::string said = {}) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto next_progress = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::map<std::string, std::string> shown;
  std::string state;
  while (!stop_requested()) {
    http::Response response = ServerApi(client).job(job_id);
    if (response.status == 404) {
      std::cout << "kernelwatch: no job " << job_id << " on " << server << "\n";
      return {};
    }
    if (response.status != 200) {
      std::cout << "kernelwatch: the server answered HTTP " << response.status << ": " << response.body
                << "\n";
      return {};
    }
    json job = response.json();
    state = job["state"];
    print_new_stages(job, shown);
    if (state == "done") {
      json run = fetch_run(client, job["run_id"]);
      add_explanation(client, run);
      add_profiles(client, run, profile_wait_s);
      const std::string link = server + "/#/run/" + std::to_string(run["id"].get<std::int64_t>());
      return {summarize(run, link, shown), run.value("project", std::string()), verdict_markdown(run, link)};
    }
    if (state == "failed") {
      const std::string why = "failed without a verdict: " + job.value("error", std::string("?"));
      std::cout << "kernelwatch: job " << job_id << " " << why
                << "\n  check the GPU agents (kw agent) of this project\n";
      return no_verdict(job, job_id, server, why);
    }
    auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      const std::string why = "no verdict after " + std::to_string(static_cast<long>(timeout_s)) +
                              " s (state " + state + "); are GPU agents running for this project?";
      std::cout << "kernelwatch: " << why << " (job " << job_id << ")\n";
      return no_verdict(job, job_id, server, why);
    }
    std::string progress = state + (job["agent"].is_string() ? " on " + job["agent"].get<std::string>() : "");
    if (progress != said || now >= next_progress) {
      say("job " + std::to_string(job_id) + " " + progress);
      said = progress;
      next_progress = now + std::chrono::seconds(30);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return {};
}

struct SubmitArguments {
  ServerOptions server;
  CiReportTargets report;
  std::string project, commit, branch, base, gpu_class, timeout = "30m";
  std::string profile_wait = "5m";
  std::string range_from, repo = ".";
  std::int64_t pr = 0;
  std::int64_t shards = 1;
  bool wait = false;
  bool rerun = false;
};

// The push's range for a bisect: the commit before the push, then the
// pushed commits on the first-parent line, oldest first, at most the newest
// 1000. A range git cannot give is said, and the job goes without it.
json pushed_range(const std::string& repo, const std::string& from, const std::string& to) {
  constexpr std::size_t kMaxPushed = 1000;
  std::vector<std::string> line;
  try {
    std::istringstream out(git(repo, {"rev-list", "--first-parent", "--reverse", from + ".." + to}));
    for (std::string commit; std::getline(out, commit);) {
      if (common::is_commit_sha(commit)) line.push_back(commit);
    }
  } catch (const std::exception& error) {
    std::cout << "kernelwatch: no bisect range from " << from.substr(0, 12) << ": " << error.what() << "\n";
    return json::array();
  }
  if (line.empty() || line.back() != to) {
    std::cout << "kernelwatch: no bisect range: " << to.substr(0, 12) << " does not descend from "
              << from.substr(0, 12) << " on its first-parent line\n";
    return json::array();
  }
  std::size_t first = line.size() > kMaxPushed ? line.size() - kMaxPushed : 0;
  json range = json::array({first == 0 ? from : line[first - 1]});
  for (std::size_t i = first; i < line.size(); ++i) range.push_back(line[i]);
  return range;
}

// What the server did with the submit: a new job (a rerun says which), the
// job this commit already has, and whether the other side (the default
// branch or a pull request) measured the commit too.
std::string job_line(const json& job, bool created) {
  const std::string state = job["state"];
  const int rerun = job.value("rerun", 0);
  std::string line = "job " + job["id"].dump() + " ";
  if (!created) {
    return line + "already exists (" + state + (rerun > 0 ? ", rerun " + std::to_string(rerun) : "") +
           "; kw submit --rerun measures it again)";
  }
  // A sharded job is running from the start: its shards are what is queued.
  const int shards = job.value("shards", 1);
  line += shards > 1 ? "queued as " + std::to_string(shards) + " shards" : state;
  if (rerun > 0) line += " (rerun " + std::to_string(rerun) + " of this commit)";
  const json other = job.value("measured_on_other_side", json());
  if (!other.is_object()) return line;
  const std::string seen = "job " + other["job_id"].dump() +
                           (other["verdict"].is_string() ? ", " + other["verdict"].get<std::string>() : "");
  if (!job.value("on_default_branch", false))
    return line + "; the default branch measured this commit too (" + seen + ")";
  const std::string where = other["pr"].is_number() ? "pull request #" + other["pr"].dump()
                                                    : "branch " + other["branch"].get<std::string>();
  return line + "; the commit was measured as " + where + " (" + seen +
         "): the default branch gets a run of its own, the baseline of what follows";
}

GateOutcome gate_stored_run(http::Client& client, const std::string& server, std::int64_t run_id) {
  json run = fetch_run(client, run_id);
  add_explanation(client, run);
  const std::string link = server + "/#/run/" + std::to_string(run_id);
  return {summarize(run, link, {}), run.value("project", std::string()), verdict_markdown(run, link)};
}

int guarded(const std::string& server, const std::function<int()>& body) {
  try {
    return body();
  } catch (const http::ConnectionError& error) {
    std::cout << "kernelwatch: cannot reach the server " << server << ": " << error.what() << "\n";
    return kExitInfrastructure;
  } catch (const CLI::ParseError&) {
    throw;
  } catch (const std::exception& error) {
    std::cout << "kernelwatch: " << error.what() << "\n";
    return kExitInfrastructure;
  }
}

struct AckArguments {
  ServerOptions server;
  std::int64_t run = 0, job = 0;
  std::string reason;
};

// kw ack: acknowledges a run's regression (a job's run, for what kw submit
// printed) with a reason; says which cases it covers.
int acknowledge(const AckArguments& args) {
  http::Client client(args.server.url, args.server.token);
  std::int64_t run_id = args.run;
  if (args.job > 0) {
    http::Response job = ServerApi(client).job(args.job);
    if (job.status != 200) {
      std::cout << "kernelwatch: no job " << args.job << " (HTTP " << job.status
                << "): " << job.json().value("message", job.body) << "\n";
      return kExitInfrastructure;
    }
    if (!job.json()["run_id"].is_number()) {
      std::cout << "kernelwatch: job " << args.job << " has no run yet (state "
                << job.json().value("state", std::string("?")) << "): nothing to acknowledge\n";
      return kExitInfrastructure;
    }
    run_id = job.json()["run_id"];
  }
  http::Response response = ServerApi(client).acknowledge(run_id, args.reason);
  if (response.status != 200) {
    std::cout << "kernelwatch: run " << run_id << " not acknowledged (HTTP " << response.status
              << "): " << response.json().value("message", response.body) << "\n";
    return kExitInfrastructure;
  }
  const json carried_to = response.json().value("carried_to", json::array());
  json run = fetch_run(client, run_id);
  int regressed = 0;
  for (const json& c : run["comparisons"])
    regressed += c["status"] == "regression" && c["kind"] == "time" && c["impl"] == "candidate";
  std::cout << "kernelwatch: acknowledged run " << run_id << " ("
            << run["commit"].get<std::string>().substr(0, 12) << ", " << regressed
            << " regressed case(s)): " << args.reason << "\n  " << args.server.url << "/#/run/" << run_id
            << "\n";
  for (const json& other : carried_to) {
    std::cout << "  and run " << other.get<std::int64_t>()
              << ", a run of the same change (the same tree, or the commit that merges this one)\n";
  }
  return kExitOk;
}

// kw submit's work once its flags are checked: the job queued, then (with
// --wait) its verdict.
int submit_job(const SubmitArguments& submit, double timeout, double profile_wait) {
  http::Client client(submit.server.url, submit.server.token);
  json body{{"project", submit.project}, {"commit", submit.commit}, {"branch", submit.branch}};
  if (!submit.base.empty()) body["base_commit"] = submit.base;
  if (submit.pr > 0) body["pr"] = submit.pr;
  if (!submit.gpu_class.empty()) body["gpu_class"] = submit.gpu_class;
  if (submit.rerun) body["rerun"] = true;
  if (submit.shards > 1) body["shards"] = submit.shards;
  if (!submit.range_from.empty()) {
    json range = pushed_range(submit.repo, submit.range_from, submit.commit);
    if (range.size() > 1) body["range"] = std::move(range);
  }
  http::Response response = ServerApi(client).submit(body);
  if (response.status != 200 && response.status != 201) {
    std::cout << "kernelwatch: the server refused the job (HTTP " << response.status
              << "): " << response.json().value("message", response.body) << "\n";
    return kExitInfrastructure;
  }
  json job = response.json();
  std::int64_t id = job["id"];
  const std::string state = job["state"];
  say(job_line(job, response.status == 201));
  if (!submit.wait) {
    if (!submit.report.summary_file.empty()) {
      publish(submit.report, submit.project,
              "### kernelwatch " + submit.project + ": queued\n\nJob " + std::to_string(id) + " for `" +
                  submit.commit.substr(0, 12) + "`: the verdict comes as the commit status, and at [job " +
                  std::to_string(id) + "](" + submit.server.url + "/#/job/" + std::to_string(id) + ").\n");
    }
    std::cout << id << "\n";
    return kExitOk;
  }
  GateOutcome outcome = wait_and_gate(client, submit.server.url, id, timeout, profile_wait,
                                      response.status == 201 ? state : "");
  if (!outcome.markdown.empty()) publish(submit.report, outcome.project, outcome.markdown);
  return outcome.exit_code;
}

constexpr const char* kProfileWaitHelp =
    "with a regression: wait this long for the Nsight Compute profile of its worst case, to put it in the "
    "verdict (0: do not wait)";

void add_ack_command(CLI::App& app, int& exit_code) {
  auto ack = std::make_shared<AckArguments>();
  auto* ack_command =
      app.add_subcommand("ack", "CI: acknowledge a run's regression as intended, with a reason");
  auto* run_option = ack_command->add_option("--run", ack->run, "run id (from the verdict's link)");
  auto* job_option = ack_command->add_option("--job", ack->job, "job id (from kw submit): its run");
  run_option->excludes(job_option);
  ack_command->add_option("--reason", ack->reason, "why the slowdown is intended")->required();
  ack->server.add_to(*ack_command);
  ack_command->callback([ack, run_option, job_option, &exit_code] {
    ack->server.resolve();
    if (run_option->count() == 0 && job_option->count() == 0)
      throw CLI::ValidationError("--run/--job", "name the run or the job to acknowledge");
    if (ack->reason.empty()) throw CLI::ValidationError("--reason", "is empty");
    exit_code = guarded(ack->server.url, [&] { return acknowledge(*ack); });
  });
}

void add_submit_command(CLI::App& app, int& exit_code) {
  auto submit = std::make_shared<SubmitArguments>();
  auto* command =
      app.add_subcommand("submit", "CI: queue a commit for benchmarking; with --wait, exit with its verdict");
  command->add_option("--project", submit->project, "project name")->required();
  command->add_option("--commit", submit->commit, "40-hex commit SHA")->required();
  command->add_option("--branch", submit->branch, "branch it was pushed to")->required();
  command->add_option("--base", submit->base, "a pull request's base commit to compare with");
  command->add_option("--pr", submit->pr, "pull request number");
  command->add_option("--gpu-class", submit->gpu_class, "GPU model to run on (default: any)");
  command
      ->add_option("--shards", submit->shards,
                   "split the cases over this many GPUs of one model, each measuring its share; one run, "
                   "one verdict")
      ->check(CLI::Range(std::int64_t{1}, common::kMaxShards))
      ->capture_default_str();
  command->add_flag("--wait", submit->wait, "wait for the verdict and exit with it");
  command->add_flag("--rerun", submit->rerun,
                    "measure the commit again though it has a job (a new job; the default: its job)");
  command->add_option("--timeout", submit->timeout, "with --wait: give up after this long (90s, 30m, 2h)")
      ->capture_default_str();
  command->add_option("--profile-wait", submit->profile_wait, kProfileWaitHelp)->capture_default_str();
  command->add_option("--range-from", submit->range_from,
                      "a push to the default branch: the commit before it (GitHub: github.event.before); a "
                      "regression is then bisected over the pushed commits");
  command->add_option("--repo", submit->repo, "with --range-from: the checkout that has the commits")
      ->capture_default_str();
  submit->server.add_to(*command);
  submit->report.add_to(*command);
  command->callback([submit, &exit_code] {
    submit->server.resolve();
    submit->report.resolve();
    if (submit->report.posts() && !submit->wait)
      throw CLI::ValidationError("--github-comment/--gitlab-note",
                                 "need --wait: without it there is no verdict to post (the commit status "
                                 "kw-server posts carries it)");
    if (!common::is_commit_sha(submit->commit)) {
      throw CLI::ValidationError("--commit",
                                 "must be a 40-character lowercase hex SHA, got " + submit->commit);
    }
    if (!submit->base.empty() && !common::is_commit_sha(submit->base)) {
      throw CLI::ValidationError("--base", "must be a 40-character lowercase hex SHA, got " + submit->base);
    }
    double timeout = parse_duration(submit->timeout, "--timeout");
    double profile_wait = parse_duration(submit->profile_wait, "--profile-wait", true);
    exit_code = guarded(submit->server.url, [&] { return submit_job(*submit, timeout, profile_wait); });
  });
}

void add_gate_command(CLI::App& app, int& exit_code) {
  auto gate = std::make_shared<SubmitArguments>();
  auto job_id = std::make_shared<std::int64_t>(0);
  auto run_id = std::make_shared<std::int64_t>(0);
  auto* gate_command =
      app.add_subcommand("gate", "CI: wait for a job's verdict, or read a stored run's, and exit with it");
  auto* job_option = gate_command->add_option("--job", *job_id, "job id (from kw submit)");
  auto* run_option = gate_command->add_option("--run", *run_id, "run id (from kw run --server or kw upload)");
  job_option->excludes(run_option);
  gate_command->add_option("--timeout", gate->timeout, "give up after this long (90s, 30m, 2h)")
      ->capture_default_str();
  gate_command->add_option("--profile-wait", gate->profile_wait, kProfileWaitHelp)->capture_default_str();
  gate->server.add_to(*gate_command);
  gate->report.add_to(*gate_command);
  gate_command->callback([gate, job_id, run_id, job_option, run_option, &exit_code] {
    gate->server.resolve();
    gate->report.resolve();
    if (job_option->count() == 0 && run_option->count() == 0)
      throw CLI::ValidationError("--job/--run", "name the job to wait for or the run to gate");
    double timeout = parse_duration(gate->timeout, "--timeout");
    double profile_wait = parse_duration(gate->profile_wait, "--profile-wait", true);
    exit_code = guarded(gate->server.url, [&] {
      http::Client client(gate->server.url, gate->server.token);
      GateOutcome outcome = run_option->count() > 0
                                ? gate_stored_run(client, gate->server.url, *run_id)
                                : wait_and_gate(client, gate->server.url, *job_id, timeout, profile_wait);
      if (!outcome.markdown.empty()) publish(gate->report, outcome.project, outcome.markdown);
      return outcome.exit_code;
    });
  });
}

}  // namespace

int gate_run(http::Client& client, const std::string& server, std::int64_t run_id) {
  return gate_stored_run(client, server, run_id).exit_code;
}

void add_gate_commands(CLI::App& app, int& exit_code) {
  add_ack_command(app, exit_code);
  add_submit_command(app, exit_code);
  add_gate_command(app, exit_code);
}

}  // namespace kw::agent
