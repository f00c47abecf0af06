// kw agent: the GPU host loop. Claims a job, checks the commit out into a
// worktree of a per-project mirror, runs the pipeline while heartbeating the
// lease, and delivers the report through the spool (never lost, stored once).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "cli/commands.hpp"
#include "client/server_api.hpp"
#include "client/spool.hpp"
#include "host/gpu_health.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/json_reader.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/subprocess.hpp"
#include "kw/http/client.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/measurement_engine.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/profile_summary.hpp"
#include "pipeline/profiling.hpp"
#include "project/built_commits.hpp"
#include "project/git.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct AgentArguments {
  ServerOptions server;
  std::string work_dir;
  // Where the compiler cache and correctness references live: the host's
  // workers share them (default: work_dir).
  std::string shared_dir;
  std::vector<std::string> repos;  // PROJECT=URL
  std::string name;
  double poll_seconds = 10;
  bool once = false;
  std::vector<std::string> gpu_test_doubles;
  std::vector<std::string> gpus;  // UUIDs or NVML indices; empty: every GPU
  std::string gpu_check;          // the health check command; empty: kw gpu-check
  double health_seconds = 300;
  // ncu for profile jobs; empty: ncu in PATH or CUDA's bin (a real GPU only); "none": no profile jobs.
  std::string ncu;
};

// The GPU a worker owns.
struct WorkerGpu {
  std::string uuid;
  int index = 0;
  std::string model;
  bool test_double = false;
};

// Sleeps until the time passes or a stop is requested.
void pause(double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!stop_requested() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Renews the lease until stopped; raises `lost` when the server says the job
// is no longer ours (the pipeline is then stopped).
class Heartbeat {
 public:
  Heartbeat(const AgentArguments& args, std::int64_t job, double lease_seconds, std::atomic<bool>& lost)
      : thread_([this, &args, job, lease_seconds, &lost] {
          http::Client client(args.server.url, args.server.token, std::chrono::seconds(10));
          ServerApi api(client);
          auto period = std::chrono::duration<double>(std::max(0.2, lease_seconds / 3));
          std::unique_lock lock(mutex_);
          while (!wake_.wait_for(lock, period, [this] { return done_; })) {
            try {
              http::Response response = api.heartbeat(job, args.name);
              if (response.status == 409 || response.status == 404) {
                say("job " + std::to_string(job) + " is no longer ours: " + response.body);
                lost = true;
                return;
              }
            } catch (const http::ConnectionError& error) {
              say(std::string("heartbeat failed: ") + error.what());
            }
          }
        }) {}
  ~Heartbeat() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// `stop` is raised on SIGTERM or when the lease is lost (and when this ends):
// what stops a job's work.
class StopWatcher {
 public:
  explicit StopWatcher(const std::atomic<bool>& lost)
      : thread_([this, &lost] {
          while (!done_ && !stop_requested() && !lost)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          stop = true;
        }) {}
  ~StopWatcher() {
    done_ = true;
    thread_.join();
  }
  std::atomic<bool> stop{false};

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// A profile job's result for POST /api/v1/jobs/ID/profile: its case under
// ncu in the job's base commit (when it names one) and its commit, built as
// kw profile builds them. Throws what kept it from running; an ncu refused
// the GPU's performance counters also clears `can_profile`.
json profile_job_result(const AgentArguments& args, const json& job, const fs::path& mirror,
                        BuiltCommits& built, const fs::path& ncu, const fs::path& work,
                        const std::atomic<bool>& stop, bool& can_profile) {
  const json& profile = job["profile"];
  ProfileTarget target;
  target.case_name = profile["case"];
  target.launch_count = profile.value("launch_count", 10);
  if (profile["kernel"].is_string()) target.kernel = profile["kernel"];
  target.ncu = ncu;
  std::vector<ProfiledCommit> commits;
  if (job["base_commit"].is_string()) commits.push_back({"base", job["base_commit"], {}});
  commits.push_back({"head", job["commit"], {}});
  for (ProfiledCommit& commit : commits) {
    std::string why;
    const std::optional<fs::path> tree = built.get(mirror, commit.commit, stop, say, why);
    if (!tree) throw std::runtime_error(commit.side + ": " + why);
    commit.tree = *tree;
  }
  const fs::path out = work / "profiles" / ("job-" + job["id"].dump());
  fs::remove_all(out);
  bool denied = false;
  json summary;
  try {
    summary = profile_commits(target, commits, out, stop, &denied);
  } catch (const std::exception&) {
    if (denied) {
      can_profile = false;
      say("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): this agent takes no more "
          "profile jobs");
    }
    throw;
  }
  std::cerr << profile_markdown(summary) << std::flush;
  json body{{"agent", args.name}, {"summary", summary}};
  bool kept = false;
  for (const ProfiledCommit& commit : commits) {
    const fs::path csv = out / (commit.side + ".csv");
    if (fs::file_size(csv) > common::kMaxProfileCsvBytes) {
      say(commit.side + ": ncu's CSV is over the server's " +
          std::to_string(common::kMaxProfileCsvBytes >> 20) + " MiB; kept only here: " + csv.string());
      kept = true;
      continue;
    }
    std::ifstream in(csv);
    body[commit.side + "_csv"] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  if (!kept) fs::remove_all(out);
  return body;
}

// The command line and environment of the worker of one GPU.
common::ChildSpec worker_spec(const AgentArguments& args, const WorkerGpu& gpu, const fs::path& self,
                              const fs::path& work, const std::string& name) {
  common::ChildSpec spec;
  spec.argv = {self.string(),
               "agent",
               "--work-dir",
               (work / ("gpu-" + std::to_string(gpu.index))).string(),
               "--shared-dir",
               args.shared_dir.empty() ? work.string() : args.shared_dir,
               "--name",
               name,
               "--poll-seconds",
               std::to_string(args.poll_seconds),
               "--gpu",
               gpu.uuid,
               "--health-seconds",
               std::to_string(args.health_seconds)};
  for (const std::string& repo : args.repos) spec.argv.insert(spec.argv.end(), {"--repo", repo});
  for (const std::string& model : args.gpu_test_doubles)
    spec.argv.insert(spec.argv.end(), {"--gpu-test-double", model});
  if (!args.gpu_check.empty()) spec.argv.insert(spec.argv.end(), {"--gpu-check", args.gpu_check});
  if (!args.ncu.empty()) spec.argv.insert(spec.argv.end(), {"--ncu", args.ncu});
  if (args.once) spec.argv.emplace_back("--once");
  // The token goes through the environment, never the command line.
  spec.env = {{"KW_SERVER", args.server.url}, {"KW_TOKEN", args.server.token}};
  if (!gpu.test_double) spec.env["CUDA_VISIBLE_DEVICES"] = gpu.uuid;
  spec.timeout_s = 1e9;
  spec.stop_grace_s = 120;  // it ends its stage and gives its job back first
  spec.on_line = [name](const std::string& line) {
    // One write per line: the workers' lines never interleave.
    std::string text;
    text.append("[").append(name).append("] ").append(line).append("\n");
    std::cerr << text << std::flush;
  };
  return spec;
}

// One `kw agent` process per GPU, pinned to it by UUID through
// CUDA_VISIBLE_DEVICES (so every process of its jobs sees only that GPU),
// each with its own name, mirrors, build trees and spool under
// work/gpu-<index>, sharing the compiler cache and references. A worker that
// exits on its own is started again; SIGTERM reaches each, which gives its
// job back.
int supervise_workers(const AgentArguments& args, const std::vector<WorkerGpu>& gpus) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this kw (/proc/self/exe): " + ec.message());
  const fs::path work = fs::absolute(args.work_dir);
  say(std::to_string(gpus.size()) + " workers, one per GPU:");
  std::atomic<int> exit_code{kExitOk};
  std::vector<std::thread> workers;
  for (const WorkerGpu& gpu : gpus) {
    const std::string name = args.name + "-gpu" + std::to_string(gpu.index);
    say("  " + name + ": GPU " + std::to_string(gpu.index) + " " + gpu.uuid + " (" + gpu.model + ")");
    const common::ChildSpec spec = worker_spec(args, gpu, self, work, name);
    workers.emplace_back([spec, name, &args, &exit_code] {
      while (!stop_requested()) {
        common::ChildOutcome outcome = common::run_child(spec, stop_requested());
        if (stop_requested() || args.once) break;
        if (outcome.exit_code == kExitInfrastructure) {
          say(name + " stopped: " + outcome.describe() + " (the server refused its token)");
          exit_code = kExitInfrastructure;
          break;
        }
        say(name + " " + outcome.describe() + "; started again in " + std::to_string(args.poll_seconds) +
            " s");
        pause(args.poll_seconds);
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  say("agent stopped");
  return exit_code;
}

// --repo PROJECT=URL, each.
std::map<std::string, std::string> repo_urls_of(const AgentArguments& args) {
  std::map<std::string, std::string> urls;
  for (const std::string& entry : args.repos) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CLI::ValidationError("--repo", "expected PROJECT=URL, got " + entry);
    urls[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return urls;
}

// The GPUs this agent works on: its test doubles, else what the host has,
// narrowed by --gpu or, where the host already narrowed the agent,
// CUDA_VISIBLE_DEVICES (its indices taken as nvidia-smi's). `source` says
// where the list came from.
std::vector<WorkerGpu> select_gpus(AgentArguments& args, std::string& source) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (args.gpus.empty() && visible != nullptr && *visible != '\0' && args.gpu_test_doubles.empty()) {
    std::stringstream list(visible);
    for (std::string entry; std::getline(list, entry, ',');) args.gpus.push_back(entry);
  }
  GpuInventory inventory;
  if (!args.gpu_test_doubles.empty()) {
    inventory.models = args.gpu_test_doubles;
    for (std::size_t i = 0; i < inventory.models.size(); ++i)
      inventory.uuids.push_back("GPU-test-double-" + std::to_string(i));
    inventory.source = "test double";
  } else {
    inventory = detect_gpus();
  }
  source = inventory.source;
  std::vector<WorkerGpu> gpus;
  for (std::size_t i = 0; i < inventory.uuids.size(); ++i) {
    const bool wanted =
        args.gpus.empty() || std::any_of(args.gpus.begin(), args.gpus.end(), [&](const auto& g) {
          return g == inventory.uuids[i] || g == std::to_string(i);
        });
    if (wanted)
      gpus.push_back(
          {inventory.uuids[i], static_cast<int>(i), inventory.models[i], !args.gpu_test_doubles.empty()});
  }
  if (!args.gpus.empty() && gpus.size() != args.gpus.size())
    throw CLI::ValidationError("--gpu", "names a GPU this host does not have (" +
                                            std::to_string(inventory.uuids.size()) + " from " +
                                            inventory.source + ")");
  return gpus;
}

// Profile jobs need ncu and a GPU under it: a test double's only with an ncu
// named (a test's own double of ncu).
fs::path ncu_for(const AgentArguments& args, const std::optional<WorkerGpu>& gpu) {
  if (args.ncu == "none") return {};
  if (!args.ncu.empty()) return args.ncu;
  return gpu && !gpu->test_double ? find_cuda_tool("ncu") : fs::path();
}

// One worker: claims jobs for its GPU (or for none, on a host without one),
// runs them and delivers their reports, until stopped.
class Worker {
 public:
  Worker(const AgentArguments& args, std::optional<WorkerGpu> gpu)
      : args_(args),
        gpu_(std::move(gpu)),
        repo_urls_(repo_urls_of(args)),
        work_(fs::absolute(args.work_dir)),
        shared_(args.shared_dir.empty() ? work_ : fs::absolute(args.shared_dir)),
        built_(work_ / "built", 8, shared_ / "ccache"),
        spool_(work_ / "spool"),
        ncu_(ncu_for(args, gpu_)),
        can_profile_(gpu_ && !ncu_.empty()),
        client_(args.server.url, args.server.token, std::chrono::seconds(30)) {
    for (const auto& [project, url] : repo_urls_) served_.push_back(project);
    if (gpu_) gpu_models_.push_back(gpu_->model);
    if (gpu_) {
      say(can_profile_ ? "profile jobs: " + ncu_.string() : "no ncu: this agent takes no profile jobs");
      say(inject_library_line());
    }
  }

  int run() {
    say("agent " + args_.name + " polling " + args_.server.url);
    while (!stop_requested()) {
      if (spool_.pending() > 0) spool_.deliver(client_, say);
      check_health();
      json job;
      const Claim claimed = claim(job);
      if ((claimed == Claim::job || claimed == Claim::none) && spool_.pending() > 0) deliver_now();
      switch (claimed) {
        case Claim::refused:
          return kExitInfrastructure;
        case Claim::none:
          if (args_.once && spool_.pending() == 0) return kExitOk;
          pause(args_.poll_seconds);
          continue;
        case Claim::retry:
          pause(args_.poll_seconds);
          continue;
        case Claim::job:
          break;
      }
      switch (run_job(job)) {
        case JobEnd::given_back:
          say("agent stopped");
          return kExitOk;
        case JobEnd::failed_on_server:
          if (args_.once) return kExitOk;
          continue;
        case JobEnd::no_report:
          continue;
        case JobEnd::reported:
          break;
      }
      if (args_.once) {
        while (spool_.pending() > 0 && !stop_requested()) {
          pause(1);
          if (server_answers()) {
            deliver_now();
          } else {
            spool_.deliver(client_, say);
          }
        }
        return kExitOk;
      }
    }
    say("agent stopped");
    return kExitOk;
  }

 private:
  enum class Claim { job, none, retry, refused };
  enum class JobEnd { reported, no_report, failed_on_server, given_back };

  // Checked before claiming when the last check is older than
  // health_seconds: a real GPU always, a test double with --gpu-check. The
  // checks that fail are said when they change, not at every re-check while
  // a failure lasts (its numbers may move).
  void check_health() {
    if (!gpu_ || (gpu_->test_double && args_.gpu_check.empty())) return;
    if (health_ && std::chrono::steady_clock::now() - health_checked_ <
                       std::chrono::duration<double>(args_.health_seconds))
      return;
    auto failing = [this] {
      std::string names;
      for (const GpuCheck& check : health_->checks) {
        if (!check.passed) names += check.name + " ";
      }
      return names;
    };
    const bool was_healthy = !health_ || health_->healthy();
    const std::string was_failing = health_ ? failing() : std::string();
    health_ = check_gpu_in_child(gpu_->uuid, gpu_->index, gpu_->model, args_.gpu_check);
    health_checked_ = std::chrono::steady_clock::now();
    if (!health_->healthy() && failing() != was_failing)
      say("GPU " + gpu_->uuid + " failed its health check: " + health_->failures() +
          "; this worker claims no job until it passes (checked again every " +
          std::to_string(static_cast<int>(args_.health_seconds)) + " s)");
    else if (health_->healthy() && !was_healthy)
      say("GPU " + gpu_->uuid + " passed its health check again");
  }

  // Asks for a job of the projects this agent can fetch (the server hands it
  // no other's), saying what its GPU is and how its last check went.
  Claim claim(json& job) {
    try {
      json claim{{"agent", args_.name}, {"host", host_name()}, {"version", KW_VERSION},
                 {"gpus", gpu_models_}, {"projects", served_}, {"can_profile", can_profile_}};
      if (gpu_) claim["gpu"] = {{"uuid", gpu_->uuid}, {"index", gpu_->index}, {"model", gpu_->model}};
      if (health_)
        claim["health"] = {{"healthy", health_->healthy()}, {"checks", health_->to_json()["checks"]}};
      http::Response response = ServerApi(client_).claim(claim);
      if (response.status == 204) return Claim::none;
      if (response.status != 200) {
        say("claim refused (HTTP " + std::to_string(response.status) + "): " + response.body);
        return response.status == 401 || response.status == 403 ? Claim::refused : Claim::retry;
      }
      job = response.json();
      return Claim::job;
    } catch (const http::ConnectionError& error) {
      say(std::string("server unreachable: ") + error.what());
      return Claim::retry;
    }
  }

  // The server answers again: what its outage left in the spool goes now.
  void deliver_now() {
    if (const std::size_t waiting = spool_.retry_now(); waiting > 0)
      say("the server answers: " + std::to_string(waiting) + " spooled report(s) go now");
    spool_.deliver(client_, say);
  }

  bool server_answers() {
    try {
      return ServerApi(client_).health().status == 200;
    } catch (const http::ConnectionError&) {
      return false;
    }
  }

  // A claimed job, from its checkout to its report in the spool; a job that
  // cannot run is failed on the server, one stopped is given back.
  JobEnd run_job(const json& job) {
    const std::int64_t job_id = job["id"];
    const std::string project = job["project"], commit = job["commit"];
    const bool profile_job = job.value("kind", std::string()) == "profile";
    say("claimed job " + std::to_string(job_id) + ": " +
        (profile_job ? "profile " + job["profile"]["case"].get<std::string>() + " of " : std::string()) +
        project + " " + commit.substr(0, 12) + " (" + job.value("branch", std::string()) + ")");
    BuildTree tree;
    std::atomic<bool> lost{false};
    json report;
    std::string cannot_run;  // why no report can be made of this job
    try {
      auto url = repo_urls_.find(project);
      if (url == repo_urls_.end())
        throw std::runtime_error("no --repo " + project + "=URL given to this agent");
      const fs::path mirror = update_mirror(work_ / "mirrors", project, url->second);
      if (!profile_job)
        tree = built_.checkout_for(mirror, project, job.value("branch", std::string("main")), commit, say);
      Heartbeat heartbeat(args_, job_id, job.value("lease_seconds", 120.0), lost);
      StopWatcher watcher(lost);
      report = profile_job
                   ? profile_job_result(args_, job, mirror, built_, ncu_, work_, watcher.stop, can_profile_)
                   : measure(job, mirror, tree, watcher.stop);
      if (stop_requested() || lost) report = json();
    } catch (const std::exception& error) {
      cannot_run = error.what();
      say("job " + std::to_string(job_id) + " could not run: " + cannot_run);
    }
    keep_built(project, tree, commit, report);
    if (stop_requested() && !lost) {
      give_back(job_id);
      return JobEnd::given_back;
    }
    // Retrying would fail alike: the job fails now, with the reason on the
    // server for `kw submit` to print.
    if (report.is_null() && !lost && !cannot_run.empty() && fail_on_server(job_id, cannot_run))
      return JobEnd::failed_on_server;
    if (report.is_null()) {
      if (!lost) pause(args_.poll_seconds);  // its lease expires and it is retried or failed
      return JobEnd::no_report;
    }
    spool_.add("job-" + std::to_string(job_id),
               profile_job ? api_target::profile_result(job_id) : api_target::report_of(report), report);
    spool_.deliver(client_, say);
    return JobEnd::reported;
  }

  // The commit's stages: kernelwatch.json read (a problem, or another
  // project's, is the config stage's failure), the base built for an A/B,
  // then the pipeline.
  json measure(const json& job, const fs::path& mirror, BuildTree& tree, const std::atomic<bool>& stop) {
    const std::string project = job["project"];
    PipelineOptions options = pipeline_options(job, tree, stop);
    std::optional<RepoConfig> config;
    try {
      config = load_repo_config(tree.path / "kernelwatch.json");
      if (config->project != project)
        throw ConfigError({"project: \"" + config->project + "\" is not this job's project \"" + project +
                           "\" (kernelwatch.json names the project as the server knows it)"});
    } catch (const ConfigError& error) {
      // The commit says the same on every attempt: a failed stage, not a retry.
      return config_failure_report(project, error, options);
    }
    // Few identical cases audited yet on this GPU model: the server asks for more.
    if (job.contains("audit")) {
      const json& audit = job["audit"];
      const double share = job_audit_share(config->full_bench.audit_share, audit);
      auto fixed_percent = [](double value) { return std::to_string(std::lround(100 * value)) + "%"; };
      if (share > config->full_bench.audit_share) {
        say("audit: " + audit.value("audited", json(0)).dump() + " identical case(s) of " + project +
            " audited on " + audit.value("gpu_model", std::string("this GPU model")) +
            " so far, fewer than " + audit.value("until", json(0)).dump() + ": this job times " +
            fixed_percent(share) + " of its identical cases (full_bench.audit_share " +
            fixed_percent(config->full_bench.audit_share) + ")");
        config->full_bench.audit_share = share;
      }
    }
    if (options.base_commit && config->full_bench.ab &&
        full_bench_runs_here(*config, options.gpu_available)) {
      std::string why;
      options.base_checkout = built_.get(mirror, *options.base_commit, stop, say, why);
      if (!options.base_checkout)
        say("base: " + why + "; the server will compare with the stored history instead");
    }
    return run_pipeline(*config, options);
  }

  PipelineOptions pipeline_options(const json& job, BuildTree& tree, const std::atomic<bool>& stop) {
    const std::int64_t job_id = job["id"];
    PipelineOptions options;
    options.checkout = tree.path;
    options.built_from = tree.built_from;
    options.clean_build_tree = [&tree] { BuiltCommits::clean(tree); };
    options.ccache_dir = shared_ / "ccache";
    options.reference_cache_dir = shared_ / "references";
    options.fingerprint_cache_dir = shared_ / "fingerprints";
    options.commit = job["commit"].get<std::string>();
    options.branch = job.value("branch", std::string("main"));
    if (job.contains("base_commit") && job["base_commit"].is_string())
      options.base_commit = job["base_commit"];
    if (job.contains("project_thresholds"))
      options.project_thresholds = common::parse_thresholds(job["project_thresholds"], "project_thresholds");
    if (job.contains("project_detection"))
      options.detection = common::parse_project_detection(job["project_detection"], "project_detection");
    // A bisect step judges the cases its regression flagged: it measures those alone.
    if (job.contains("cases") && job["cases"].is_array())
      options.only_cases = job["cases"].get<std::vector<std::string>>();
    // One shard of a job split over several GPUs: its part of the cases.
    if (job.contains("shard") && job["shard"].is_object())
      options.shard = common::ShardSpec{job["shard"]["index"].get<std::int64_t>() - 1,
                                        job["shard"]["count"].get<std::int64_t>()};
    options.job_id = job_id;
    options.agent_name = args_.name;
    options.agent_host = host_name();
    options.gpu_available = gpu_.has_value();
    options.stop = &stop;
    options.log = say;
    // Progress for `kw submit --wait` and the job page; the report stays the
    // record, so a stage the server did not take is only logged.
    options.on_stage = [this, job_id](const json& event) {
      json body{{"agent", args_.name}};
      if (event.contains("started")) {
        body["started"] = event["started"];
      } else {
        body["stage"] = event;
        body["stage"].erase("details");  // the report carries them
      }
      try {
        http::Response response = ServerApi(client_).stage(job_id, body);
        if (response.status != 200)
          say("stage not recorded on the server (HTTP " + std::to_string(response.status) +
              "): " + response.body);
      } catch (const http::ConnectionError& error) {
        say(std::string("stage not recorded on the server: ") + error.what());
      }
    };
    return options;
  }

  // A commit that built is kept for pull requests based on it.
  void keep_built(const std::string& project, BuildTree& tree, const std::string& commit,
                  const json& report) {
    try {
      const bool built_ok = report.is_object() && report.contains("stages") && !report["stages"].empty() &&
                            report["stages"][0]["status"] == "passed";
      if (!tree.path.empty()) built_.finish(work_ / "mirrors" / (project + ".git"), tree, commit, built_ok);
    } catch (const std::exception& error) {
      say(std::string("built commit not kept: ") + error.what());
    }
  }

  // Another agent takes it now, not at lease expiry.
  void give_back(std::int64_t job_id) {
    try {
      ServerApi(client_).release(job_id, args_.name);
      say("job " + std::to_string(job_id) + " given back");
    } catch (const http::ConnectionError&) {
      say("job " + std::to_string(job_id) + " not given back (server unreachable); its lease will expire");
    }
  }

  bool fail_on_server(std::int64_t job_id, const std::string& why) {
    try {
      http::Response response = ServerApi(client_).fail(job_id, args_.name, why);
      if (response.status == 200) {
        say("job " + std::to_string(job_id) + " failed on the server: " + why);
        return true;
      }
      say("job " + std::to_string(job_id) + " not failed on the server (HTTP " +
          std::to_string(response.status) + "): " + response.body);
    } catch (const http::ConnectionError& error) {
      say("job " + std::to_string(job_id) + " not failed on the server: " + error.what());
    }
    return false;
  }

  const AgentArguments& args_;
  const std::optional<WorkerGpu> gpu_;
  const std::map<std::string, std::string> repo_urls_;
  json served_ = json::array();  // the projects of its --repo
  std::vector<std::string> gpu_models_;
  const fs::path work_, shared_;
  BuiltCommits built_;
  Spool spool_;
  const fs::path ncu_;
  bool can_profile_;  // cleared when ncu may not read this GPU's counters
  http::Client client_;
  std::optional<GpuHealth> health_;
  std::chrono::steady_clock::time_point health_checked_{};
};

int agent_loop(AgentArguments args) {
  args.server.resolve();
  if (args.name.empty()) args.name = host_name();
  repo_urls_of(args);  // --repo is checked before any GPU is looked at
  std::string source;
  const std::vector<WorkerGpu> gpus = select_gpus(args, source);
  if (gpus.size() > 1) return supervise_workers(args, gpus);
  const std::optional<WorkerGpu> gpu = gpus.empty() ? std::nullopt : std::optional(gpus.front());
  if (!gpu) {
    say("no CUDA device (" + source + "): GPU stages will be skipped");
  } else if (gpu->test_double) {
    say("GPU test double \"" + gpu->model + "\": benches run as if on that GPU");
  } else {
    // Every process of its jobs sees this GPU alone.
    setenv("CUDA_VISIBLE_DEVICES", gpu->uuid.c_str(), 1);
    say("GPU " + std::to_string(gpu->index) + ": " + gpu->model + " " + gpu->uuid + " (" + source + ")");
  }
  return Worker(args, gpu).run();
}

}  // namespace

void add_agent_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AgentArguments>();
  auto* command = app.add_subcommand("agent", "Run as a GPU-host agent: claim jobs, run them, report");
  args->server.add_to(*command);
  command->add_option("--work-dir", args->work_dir, "mirrors, worktrees and the report spool live here")
      ->required();
  command->add_option("--repo", args->repos, "PROJECT=URL: where to fetch a project's commits (repeatable)");
  command->add_option("--name", args->name, "agent name (default: host name)");
  command->add_option("--poll-seconds", args->poll_seconds, "wait between claims when idle")
      ->capture_default_str();
  command->add_flag("--once", args->once, "exit after one job (or when none is queued)");
  command->add_option(
      "--gpu", args->gpus,
      "a GPU's UUID or NVML index to run a worker on (repeatable; default: one worker per GPU)");
  command->add_option("--gpu-check", args->gpu_check,
                      "health check command run between jobs (default: kw gpu-check); it prints kw gpu-check "
                      "--json's result for the GPU in KW_GPU_UUID");
  command
      ->add_option("--health-seconds", args->health_seconds, "how old a health check may be before a claim")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  command->add_option(
      "--ncu", args->ncu,
      "the Nsight Compute CLI for profile jobs (default: ncu in PATH or CUDA's bin; none: take "
      "no profile jobs)");
  command->add_option("--shared-dir", args->shared_dir)->group("");  // a worker's: its host's shared caches
  command->add_option(
      "--gpu-test-double", args->gpu_test_doubles,
      "TEST DOUBLE: advertise and run as if a GPU of this model were present (repeatable: one "
      "worker each)");
  command->callback([args, &exit_code] { exit_code = agent_loop(*args); });
}

}  // namespace kw::agent
