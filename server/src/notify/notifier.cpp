#include "notify/notifier.hpp"

#include "errors.hpp"

#include <cmath>
#include <iostream>
#include <set>

#include "notify/outbound_http.hpp"
#include "store/bisect_repository.hpp"
#include "store/job_repository.hpp"
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

struct ProjectTargets {
  std::string name, github_repo, webhook_url, gitlab_project;
  bool github(const NotifierOptions& options) const {
    return !github_repo.empty() && !options.github_token.empty();
  }
  bool gitlab(const NotifierOptions& options) const {
    return !gitlab_project.empty() && !options.gitlab_token.empty();
  }
};

ProjectTargets targets(pqxx::work& tx, std::int64_t project_id) {
  pqxx::row row = tx.exec_params1(
      "SELECT name, COALESCE(github_repo, ''), COALESCE(webhook_url, ''), COALESCE(gitlab_project, '') "
      "FROM projects WHERE id = $1",
      project_id);
  return {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
          row[3].as<std::string>()};
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
  if (project.github(options)) {
    enqueue(tx, "github_status", status_url(options, project.github_repo, sha),
            {{"state", state},
             {"target_url", link},
             {"description", truncate(description, 140)},  // GitHub's limit
             {"context", context}});
  }
  if (project.gitlab(options)) {
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
  ProjectTargets project = targets(tx, project_id);
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
  // A profile explains a verdict; its failure is no status of the commit.
  if (job.value("kind", std::string()) == "profile") {
    profile_ended(tx, options, job_id);
    return;
  }
  const auto project_id =
      tx.exec_params1("SELECT project_id FROM jobs WHERE id = $1", job_id)[0].as<std::int64_t>();
  job_status(tx, options, project_id, job, "error", "could not run: " + job.value("error", std::string()));
  if (auto ended = BisectRepository::step_failed(tx, job_id)) bisect_ended(tx, options, *ended);
}

void NotificationRepository::verdict(pqxx::work& tx, const NotifierOptions& options, std::int64_t run_id) {
  pqxx::row run = tx.exec_params1(
      "SELECT r.project_id, r.commit_sha, r.branch, r.verdict, r.gpu_model, r.job_id, "
      "       COALESCE(j.gpu_class, 'any'), COALESCE(r.acknowledged_by, ''), COALESCE(r.acknowledged_reason, "
      "'') "
      "FROM runs r LEFT JOIN jobs j ON j.id = r.job_id WHERE r.id = $1",
      run_id);
  ProjectTargets project = targets(tx, run[0].as<std::int64_t>());
  if (project.webhook_url.empty() && !project.github(options) && !project.gitlab(options)) return;
  std::string commit = run[1].as<std::string>(), verdict = run[3].as<std::string>();
  std::string gpu_class = run[6].as<std::string>(), acknowledged_by = run[7].as<std::string>();

  json regressions = json::array();
  std::set<std::string> regressed_cases;
  for (const auto& row :
       tx.exec_params("SELECT case_name, ratio, lower, upper, kind FROM comparisons "
                      "WHERE run_id = $1 AND kind IN ('time', 'energy') AND impl = 'candidate' "
                      "AND status = 'regression' ORDER BY kind = 'energy', ratio DESC",
                      run_id)) {
    regressed_cases.insert(row[0].as<std::string>());
    regressions.push_back({{"case", row[0].as<std::string>()},
                           {"kind", row[4].as<std::string>()},
                           {"ratio", row[1].as<double>()},
                           {"lower", row[2].as<double>()},
                           {"upper", row[3].as<double>()}});
  }
  std::string failed_stage;
  if (verdict == "failed") {
    pqxx::result stage = tx.exec_params(
        "SELECT name, message FROM stages WHERE run_id = $1 AND status = 'failed' ORDER BY ordinal LIMIT 1",
        run_id);
    failed_stage = stage.empty() ? "correctness check failed"
                                 : stage[0][0].as<std::string>() + ": " + stage[0][1].as<std::string>();
  }
  std::string description;
  if (!acknowledged_by.empty()) {
    description = "regression acknowledged by " + acknowledged_by + ": " + run[8].as<std::string>();
  } else if (verdict == "regression" && !regressions.empty()) {
    // Time first: an energy regression leads only when no time regressed.
    char worst[64];
    std::snprintf(worst, sizeof(worst), "%.3fx", regressions[0]["ratio"].get<double>());
    const bool energy = regressions[0]["kind"] == "energy";
    description = std::to_string(regressed_cases.size()) + " case(s) regressed; worst " +
                  regressions[0]["case"].get<std::string>() + " " + worst + (energy ? " in energy" : "");
  } else if (verdict == "failed") {
    description = "preflight failed: " + failed_stage;
  } else if (verdict == "no-data") {
    pqxx::result skipped = tx.exec_params(
        "SELECT name, message FROM stages WHERE run_id = $1 AND status = 'skipped' AND name = 'full_bench'",
        run_id);
    description =
        "no data: no case was measured" +
        (skipped.empty() ? std::string() : " (full_bench skipped: " + skipped[0][1].as<std::string>() + ")");
  } else {
    description = verdict == "improvement" ? "improvement, no regression" : "no regression";
  }
  std::string link = options.public_url + "/#/run/" + std::to_string(run_id);
  // An acknowledged regression is stored as a pass.
  bool good = verdict == "pass" || verdict == "improvement";
  enqueue_statuses(tx, options, project, commit, good ? "success" : "failure", link, description,
                   "kernelwatch" + (gpu_class == "any" ? std::string() : "/" + gpu_class));
  if (!project.webhook_url.empty()) {
    json job = run[5].is_null() ? json(nullptr) : json(run[5].as<std::int64_t>());
    enqueue(tx, "webhook", project.webhook_url,
            {{"event", "verdict"},
             {"project", project.name},
             {"commit", commit},
             {"branch", run[2].as<std::string>()},
             {"run_id", run_id},
             {"job_id", job},
             {"gpu_model", run[4].as<std::string>()},
             {"verdict", verdict},
             {"acknowledged", !acknowledged_by.empty()},
             {"description", description},
             {"regressions", regressions},
             {"url", link}});
  }
}

void NotificationRepository::bisect_ended(pqxx::work& tx, const NotifierOptions& options,
                                          std::int64_t bisect_id) {
  pqxx::row b = tx.exec_params1(
      "SELECT b.project_id, b.state, COALESCE(b.first_bad, ''), b.run_id, b.gpu_class, COALESCE(b.message, "
      "''), "
      "       b.steps, array_to_string(b.cases, ', '), r.commit_sha "
      "FROM bisects b JOIN runs r ON r.id = b.run_id WHERE b.id = $1",
      bisect_id);
  ProjectTargets project = targets(tx, b[0].as<std::int64_t>());
  const std::string state = b[1].as<std::string>(), first_bad = b[2].as<std::string>();
  const std::int64_t run_id = b[3].as<std::int64_t>();
  const std::string gpu_class = b[4].as<std::string>();
  const std::string link = options.public_url + "/#/run/" + std::to_string(run_id);
  if (state == "found") {
    // On the commit that brought the regression, under a context of its own.
    enqueue_statuses(tx, options, project, first_bad, "failure", link,
                     "first bad commit of the regression in " + b[8].as<std::string>().substr(0, 12) + ": " +
                         b[7].as<std::string>(),
                     "kernelwatch/bisect" + (gpu_class == "any" ? std::string() : "/" + gpu_class));
  }
  if (!project.webhook_url.empty()) {
    enqueue(tx, "webhook", project.webhook_url,
            {{"event", "bisect"},
             {"project", project.name},
             {"bisect_id", bisect_id},
             {"run_id", run_id},
             {"commit", b[8].as<std::string>()},
             {"state", state},
             {"first_bad", first_bad.empty() ? json(nullptr) : json(first_bad)},
             {"steps", b[6].as<int>()},
             {"description", b[5].as<std::string>()},
             {"url", link}});
  }
}

void NotificationRepository::profile_ended(pqxx::work& tx, const NotifierOptions& options,
                                           std::int64_t job_id) {
  pqxx::row f = tx.exec_params1(
      "SELECT f.project_id, f.id, f.run_id, f.case_name, f.reason, j.state, COALESCE(j.error, ''), "
      "       f.head_commit, COALESCE(f.base_commit, '') "
      "FROM profiles f JOIN jobs j ON j.id = f.job_id WHERE f.job_id = $1",
      job_id);
  ProjectTargets project = targets(tx, f[0].as<std::int64_t>());
  if (project.webhook_url.empty()) return;
  const std::int64_t run_id = f[2].as<std::int64_t>();
  const std::string base = f[8].as<std::string>();
  enqueue(tx, "webhook", project.webhook_url,
          {{"event", "profile"},
           {"project", project.name},
           {"profile_id", f[1].as<std::int64_t>()},
           {"run_id", run_id},
           {"case", f[3].as<std::string>()},
           {"reason", f[4].as<std::string>()},
           {"state", f[5].as<std::string>()},
           {"error", f[6].as<std::string>()},
           {"commit", f[7].as<std::string>()},
           {"base_commit", base.empty() ? json(nullptr) : json(base)},
           {"url", options.public_url + "/#/run/" + std::to_string(run_id)}});
}

std::vector<std::string> NotificationRepository::targets_of_project(pqxx::work& tx,
                                                                    const NotifierOptions& options,
                                                                    std::int64_t project_id) {
  const ProjectTargets project = targets(tx, project_id);
  std::vector<std::string> out;
  if (project.github(options)) out.push_back(NotificationOutbox::target_of("github_status", ""));
  if (project.gitlab(options)) out.push_back(NotificationOutbox::target_of("gitlab_status", ""));
  if (!project.webhook_url.empty())
    out.push_back(NotificationOutbox::target_of("webhook", project.webhook_url));
  return out;
}

Notifier::Notifier(ConnectionPool& pool, NotifierOptions options)
    : pool_(pool), options_(std::move(options)) {}

Notifier::~Notifier() {
  stop();
}

void Notifier::start() {
  dispatcher_ = std::thread([this] { dispatch(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { work(); });
}

void Notifier::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

// Claims what is due into the queue, one notification per target at a time:
// a target is handed out again only once its previous attempt has ended.
void Notifier::dispatch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::vector<std::string> busy(busy_.begin(), busy_.end());
    const int free_workers = std::max(1, options_.workers) - static_cast<int>(busy_.size());
    lock.unlock();
    std::vector<Outgoing> due;
    if (free_workers > 0) {
      try {
        // The lease outlasts one attempt by far: no other server process
        // sends the same notification meanwhile.
        const double lease = 4.0 * static_cast<double>(options_.timeouts.total.count()) + 60;
        due = with_transaction(pool_, [&](pqxx::work& tx) {
          return NotificationOutbox::claim_due(tx, busy, free_workers, lease);
        });
      } catch (const ServiceUnavailable&) {  // the database monitor logs that once
      } catch (const std::exception& error) {
        std::cerr << "kw-server: notifier: " << error.what() << "\n";
      }
    }
    lock.lock();
    for (Outgoing& item : due) {
      busy_.insert(item.target);
      queue_.push_back(std::move(item));
    }
    if (!due.empty()) wake_.notify_all();
    wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_seconds),
                   [this] { return stopping_ || wake_dispatcher_; });
    wake_dispatcher_ = false;
  }
}

void Notifier::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Outgoing item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      deliver(item);
    } catch (const std::exception& error) {
      std::cerr << "kw-server: notifier: " << error.what() << "\n";
    }
    lock.lock();
    busy_.erase(item.target);
    wake_dispatcher_ = true;
    wake_.notify_all();
  }
}

std::map<std::string, std::string> Notifier::headers_for(const Outgoing& item) const {
  if (item.kind == "github_status")
    return {{"Authorization", "Bearer " + options_.github_token},
            {"Accept", "application/vnd.github+json"},
            {"X-GitHub-Api-Version", "2022-11-28"}};
  if (item.kind == "gitlab_status") return {{"PRIVATE-TOKEN", options_.gitlab_token}};
  // verdict, bisect or profile: what the payload says it is.
  const std::string event = json::parse(item.body).value("event", std::string("verdict"));
  std::map<std::string, std::string> headers{{"X-Kernelwatch-Event", event},
                                             {"X-Kernelwatch-Delivery", std::to_string(item.id)}};
  if (!options_.webhook_secret.empty())
    headers["X-Kernelwatch-Signature-256"] = "sha256=" + hmac_sha256_hex(options_.webhook_secret, item.body);
  return headers;
}

void Notifier::deliver(const Outgoing& item) {
  std::string error;
  try {
    OutboundResponse response = post_json(item.url, item.body, headers_for(item), options_.timeouts);
    if (response.status / 100 == 2) {
      with_transaction(pool_, [&](pqxx::work& tx) { NotificationOutbox::delivered(tx, item); });
      return;
    }
    error = "HTTP " + std::to_string(response.status) + ": " + response.body.substr(0, 200);
  } catch (const std::exception& failure) {
    error = failure.what();
  }
  const double backoff = std::min(600.0, std::pow(2.0, item.attempts - 1));
  const bool give_up = item.attempts >= options_.max_attempts;
  std::cerr << "kw-server: notification " << item.id << " (" << item.kind << " to " << item.target
            << ") attempt " << item.attempts << " failed: " << error << (give_up ? "; giving up" : "")
            << "\n";
  with_transaction(pool_, [&](pqxx::work& tx) {
    NotificationOutbox::failed(tx, item, error, backoff, give_up, options_.target_policy);
  });
}

}  // namespace kw::server
