#include "store/notification_repository.hpp"

#include "errors.hpp"

#include <cmath>
#include <set>

#include "log_line.hpp"
#include "store/job_repository.hpp"
#include "store/notification_facts.hpp"
#include "store/notification_outbox.hpp"

namespace kw::server {

namespace {

using nlohmann::json;

std::string truncate(std::string text, std::size_t limit) {
  if (text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

void enqueue(pqxx::work& tx, const std::string& kind, const std::string& url, const json& payload) {
  NotificationOutbox::enqueue(tx, kind, url, payload);
}

// Statuses go to a forge only where the project names it and kw-server has its token.
bool to_github(const ProjectTargets& project, const NotifierOptions& options) {
  return !project.github_repo.empty() && !options.github_token.empty();
}
bool to_gitlab(const ProjectTargets& project, const NotifierOptions& options) {
  return !project.gitlab_project.empty() && !options.gitlab_token.empty();
}

std::string status_url(const NotifierOptions& options, const std::string& repo, const std::string& sha) {
  return options.github_api + "/repos/" + repo + "/statuses/" + sha;
}

// A path names the project URL-encoded ("group%2Fname").
std::string gitlab_status_url(const NotifierOptions& options, const std::string& project,
                              const std::string& sha) {
  std::string encoded;
  for (char c : project) encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  return options.gitlab_api + "/projects/" + encoded + "/statuses/" + sha;
}

// One status to each forge the project names. `state` is GitHub's word
// (pending, success, failure, error); GitLab says failed for the last two.
void enqueue_statuses(pqxx::work& tx, const NotifierOptions& options, const ProjectTargets& project,
                      const std::string& sha, const std::string& state, const std::string& link,
                      const std::string& description, const std::string& context) {
  if (to_github(project, options)) {
    enqueue(tx, "github_status", status_url(options, project.github_repo, sha),
            {{"state", state},
             {"target_url", link},
             {"description", truncate(description, 140)},  // GitHub's limit
             {"context", context}});
  }
  if (to_gitlab(project, options)) {
    enqueue(tx, "gitlab_status", gitlab_status_url(options, project.gitlab_project, sha),
            {{"state", state == "failure" || state == "error" ? "failed" : state},
             {"target_url", link},
             {"description", truncate(description, 255)},
             {"name", context}});
  }
}

}  // namespace

namespace {

// The GitHub status of a job that has no run yet (or never will), linking
// its job page.
void job_status(pqxx::work& tx, const NotifierOptions& options, std::int64_t project_id, const json& job,
                const std::string& state, const std::string& description) {
  ProjectTargets project = NotificationFacts::targets(tx, project_id);
  std::string gpu = job.value("gpu_class", std::string("any"));
  enqueue_statuses(tx, options, project, job["commit"], state,
                   options.public_url + "/#/job/" + std::to_string(job["id"].get<std::int64_t>()),
                   description + (gpu == "any" ? std::string() : " on " + gpu),
                   "kernelwatch" + (gpu == "any" ? std::string() : "/" + gpu));
}

}  // namespace

void NotificationRepository::job_queued(pqxx::work& tx, const NotifierOptions& options,
                                        std::int64_t project_id, const json& job) {
  job_status(tx, options, project_id, job, "pending", "queued for benchmarking");
}

void NotificationRepository::job_failed(pqxx::work& tx, const NotifierOptions& options, std::int64_t job_id) {
  const json job = *JobRepository::get(tx, job_id);
  const std::int64_t project_id = NotificationFacts::project_of_job(tx, job_id);
  job_status(tx, options, project_id, job, "error", "could not run: " + job.value("error", std::string()));
}

void NotificationRepository::verdict(pqxx::work& tx, const NotifierOptions& options, std::int64_t run_id) {
  const VerdictFacts run = NotificationFacts::verdict(tx, run_id);
  ProjectTargets project = NotificationFacts::targets(tx, run.project_id);
  if (project.webhook_url.empty() && !to_github(project, options) && !to_gitlab(project, options)) return;
  json regressions = json::array();
  std::set<std::string> regressed_cases;
  for (const RegressedCase& c : run.regressions) {
    regressed_cases.insert(c.name);
    regressions.push_back(
        {{"case", c.name}, {"kind", c.kind}, {"ratio", c.ratio}, {"lower", c.lower}, {"upper", c.upper}});
  }
  std::string description;
  if (!run.acknowledged_by.empty()) {
    description = "regression acknowledged by " + run.acknowledged_by + ": " + run.acknowledged_reason;
  } else if (!run.inconclusive_gate.empty() && run.regressions.empty() &&
             (run.verdict == "no-data" || run.verdict == "regression")) {
    description = run.inconclusive_gate;
  } else if (run.verdict == "regression" && !run.regressions.empty()) {
    // Time first: an energy regression leads only when no time regressed.
    char worst[64];
    std::snprintf(worst, sizeof(worst), "%.3fx", run.regressions[0].ratio);
    const bool energy = run.regressions[0].kind == "energy";
    description = std::to_string(regressed_cases.size()) + " case(s) regressed; worst " +
                  run.regressions[0].name + " " + worst + (energy ? " in energy" : "");
  } else if (run.verdict == "failed") {
    description = "preflight failed: " + run.failed_stage;
  } else if (run.verdict == "no-data") {
    description =
        "no data: no case was measured" +
        (run.full_bench_skipped ? " (full_bench skipped: " + *run.full_bench_skipped + ")" : std::string());
  } else {
    description = run.verdict == "improvement" ? "improvement, no regression"
                  : run.compared == 0          ? "pass (no baseline yet): nothing to compare with"
                                               : "no regression";
  }
  if (run.inconclusive > 0) description += "; " + std::to_string(run.inconclusive) + " inconclusive";
  std::string link = options.public_url + "/#/run/" + std::to_string(run_id);
  // An acknowledged regression is stored as a pass.
  bool good = run.verdict == "pass" || run.verdict == "improvement";
  enqueue_statuses(tx, options, project, run.commit, good ? "success" : "failure", link, description,
                   "kernelwatch" + (run.gpu_class == "any" ? std::string() : "/" + run.gpu_class));
  if (!project.webhook_url.empty()) {
    enqueue(tx, "webhook", project.webhook_url,
            {{"event", "verdict"},
             {"project", project.name},
             {"commit", run.commit},
             {"branch", run.branch},
             {"run_id", run_id},
             {"job_id", run.job_id ? json(*run.job_id) : json(nullptr)},
             {"gpu_model", run.gpu_model},
             {"verdict", run.verdict},
             {"acknowledged", !run.acknowledged_by.empty()},
             {"description", description},
             {"inconclusive", run.inconclusive},
             {"regressions", regressions},
             {"url", link}});
  }
}

void NotificationRepository::bisect_ended(pqxx::work& tx, const NotifierOptions& options,
                                          std::int64_t bisect_id) {
  const BisectFacts b = NotificationFacts::bisect(tx, bisect_id);
  ProjectTargets project = NotificationFacts::targets(tx, b.project_id);
  const std::string link = options.public_url + "/#/run/" + std::to_string(b.run_id);
  if (b.state == "found") {
    // On the commit that brought the regression, under a context of its own.
    enqueue_statuses(tx, options, project, b.first_bad, "failure", link,
                     "first bad commit of the regression in " + b.commit.substr(0, 12) + ": " + b.cases,
                     "kernelwatch/bisect" + (b.gpu_class == "any" ? std::string() : "/" + b.gpu_class));
  }
  if (!project.webhook_url.empty()) {
    enqueue(tx, "webhook", project.webhook_url,
            {{"event", "bisect"},
             {"project", project.name},
             {"bisect_id", bisect_id},
             {"run_id", b.run_id},
             {"commit", b.commit},
             {"state", b.state},
             {"first_bad", b.first_bad.empty() ? json(nullptr) : json(b.first_bad)},
             {"steps", b.steps},
             {"description", b.message},
             {"url", link}});
  }
}

void NotificationRepository::profile_ended(pqxx::work& tx, const NotifierOptions& options,
                                           std::int64_t job_id) {
  const ProfileFacts f = NotificationFacts::profile(tx, job_id);
  ProjectTargets project = NotificationFacts::targets(tx, f.project_id);
  if (project.webhook_url.empty()) return;
  enqueue(tx, "webhook", project.webhook_url,
          {{"event", "profile"},
           {"project", project.name},
           {"profile_id", f.profile_id},
           {"run_id", f.run_id},
           {"case", f.case_name},
           {"reason", f.reason},
           {"state", f.state},
           {"error", f.error},
           {"commit", f.head_commit},
           {"base_commit", f.base_commit.empty() ? json(nullptr) : json(f.base_commit)},
           {"url", options.public_url + "/#/run/" + std::to_string(f.run_id)}});
}

std::vector<std::string> NotificationRepository::targets_of_project(pqxx::work& tx,
                                                                    const NotifierOptions& options,
                                                                    std::int64_t project_id) {
  const ProjectTargets project = NotificationFacts::targets(tx, project_id);
  std::vector<std::string> out;
  if (to_github(project, options)) out.push_back(NotificationOutbox::target_of("github_status", ""));
  if (to_gitlab(project, options)) out.push_back(NotificationOutbox::target_of("gitlab_status", ""));
  if (!project.webhook_url.empty())
    out.push_back(NotificationOutbox::target_of("webhook", project.webhook_url));
  return out;
}

}  // namespace kw::server
