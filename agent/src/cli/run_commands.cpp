// kw run (one pipeline, no job), kw upload (saved reports), shared helpers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "client/server_api.hpp"
#include "client/spool.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/run_report.hpp"
#include "kw/http/client.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/pipeline.hpp"
#include "project/built_commits.hpp"
#include "project/git.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

void ServerOptions::add_to(CLI::App& command) {
  command.add_option("--server", url, "kw-server URL (or KW_SERVER)");
  command.add_option("--token-file", token_file, "a file holding the API token (or KW_TOKEN)");
  command.add_option("--token", token,
                     "API token; prefer KW_TOKEN or --token-file: a command line is visible to every user of "
                     "the host");
}

void ServerOptions::resolve() {
  if (url.empty()) {
    if (const char* env = std::getenv("KW_SERVER")) url = env;
  }
  if (!token.empty()) {
    say("warning: --token puts the token in the process list of every user of this host; use KW_TOKEN or "
        "--token-file");
  } else if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) throw CLI::ValidationError("--token-file", "cannot read " + token_file);
    std::getline(in, token);
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    if (token.empty()) throw CLI::ValidationError("--token-file", token_file + " holds no token");
  } else if (const char* env = std::getenv("KW_TOKEN")) {
    token = env;
  }
  if (url.empty()) throw CLI::ValidationError("--server", "is required (or set KW_SERVER)");
  if (token.empty()) throw CLI::ValidationError("--token", "is required: set KW_TOKEN, or --token-file FILE");
}

namespace {

// Posts a report; answers the server's JSON, or throws ConnectionError.
json post_report(http::Client& client, const json& report) {
  http::Response response = ServerApi(client).post_report(report, say);
  json answer = response.json();
  if (response.status / 100 != 2) {
    std::string why =
        "HTTP " + std::to_string(response.status) + ": " + answer.value("message", response.body);
    if (answer.value("error", std::string()) == "scope_denied")
      why += ". Run reports are posted with an agent token: kw-server token create --scope agent --project " +
             report.value("project", std::string("PROJECT")) +
             " (a CI runner that measures on its own GPU holds one beside its ci token)";
    throw std::runtime_error(why);
  }
  return answer;
}

struct RunArguments {
  std::string repo = ".";
  std::string commit = "HEAD";
  std::string branch;
  std::string base;
  std::string config;
  std::string out;
  std::string name;
  std::string gpu_test_double;
  std::string cache_dir;
  std::size_t cache_size = 8;
  bool allow_dirty = false;
  std::vector<std::string> stages;
  std::string shard;
  ServerOptions server;
};

// A checkout whose HEAD git can resolve (a copy of a tree may carry a .git
// without its history).
bool is_git_checkout(const fs::path& repo) {
  try {
    git(repo, {"rev-parse", "--verify", "HEAD^{commit}"}, 30);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Measuring the checkout in place measures its working tree: with changes
// to tracked files, that is not the commit the report names, and a report
// posted under it would enter that commit's history (one series measured an
// injected slowdown as its base commit this way).
void refuse_uncommitted_changes(const fs::path& repo, const std::string& commit, const RunArguments& args) {
  std::istringstream status(git(repo, {"status", "--porcelain", "--untracked-files=no"}, 60));
  std::vector<std::string> changed;
  for (std::string line; std::getline(status, line);) {
    if (line.size() > 3) changed.push_back(line.substr(3));
  }
  if (changed.empty()) return;
  std::string files;
  for (std::size_t i = 0; i < changed.size() && i < 5; ++i) files += (i ? ", " : "") + changed[i];
  if (changed.size() > 5) files += " and " + std::to_string(changed.size() - 5) + " more";
  if (args.allow_dirty && !args.out.empty()) {
    say("measuring uncommitted changes (" + files + ") as commit " + commit.substr(0, 12) + " into " +
        args.out + " (--allow-dirty)");
    return;
  }
  throw std::runtime_error(repo.string() + " has uncommitted changes to tracked files (" + files +
                           "): the report would name commit " + commit.substr(0, 12) +
                           " but measure something else. Commit or stash them, or measure them into a file " +
                           "with --allow-dirty --out FILE (never posted)");
}

// The project a kernelwatch.json names, even one that fails its checks;
// else the repository's folder name.
std::string project_named_in(const fs::path& config_file, const fs::path& repo) {
  std::ifstream in(config_file);
  const json document = json::parse(in, nullptr, false);
  if (document.is_object() && document.contains("project") && document["project"].is_string() &&
      !document["project"].get<std::string>().empty())
    return document["project"];
  return fs::weakly_canonical(repo).filename().string();
}

// --stages: each a stage's name, or "preflight" for every stage before
// full_bench.
std::vector<common::StageName> selected_stages(const std::vector<std::string>& names) {
  std::vector<common::StageName> selected;
  for (const std::string& stage : names) {
    if (stage == "preflight") {
      for (common::StageName preflight : common::preflight_stages()) selected.push_back(preflight);
      continue;
    }
    // Every stage after the build is one to select.
    auto name = common::stage_name_from(stage);
    if (!name || *name <= common::StageName::build) {
      std::string known;
      for (common::StageName listed : common::kAllStages)
        if (listed != common::StageName::build) known += std::string(common::to_string(listed)) + ", ";
      throw std::runtime_error("--stages: unknown stage \"" + stage + "\" (" + known +
                               "or preflight: all before full_bench)");
    }
    selected.push_back(*name);
  }
  return selected;
}

// The report to --out, else to the server, else (the server unreachable) to
// the spool for kw upload.
int deliver(const json& report, const RunArguments& args, const std::string& commit, int done) {
  if (!args.out.empty()) {
    std::ofstream(args.out) << report.dump(2) << "\n";
    say("report written to " + args.out);
    // No verdict without a server, but a failed stage is known here.
    for (const json& stage : report.value("stages", json::array())) {
      if (stage.value("status", std::string()) == "failed") return kExitPreflight;
    }
    return done;
  }
  http::Client client(args.server.url, args.server.token);
  try {
    json answer = post_report(client, report);
    const std::int64_t run_id = answer.value("run_id", std::int64_t{0});
    say("run " + std::to_string(run_id) + ": verdict " + answer.value("verdict", std::string("?")) + " (" +
        args.server.url + "/#/run/" + std::to_string(run_id) + ")");
    // The verdict decides the exit code, as kw gate's does.
    const int judged = gate_run(client, args.server.url, run_id);
    return done != kExitOk ? done : judged;
  } catch (const http::ConnectionError& error) {
    fs::path dir = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") / ".kw" / "spool";
    Spool spool(dir);
    fs::path file = spool.add("run-" + commit.substr(0, 12) + "-" + std::to_string(std::time(nullptr)),
                              api_target::report_of(report), report);
    say(std::string(error.what()) + "; report saved to " + file.string() + " (send it with kw upload)");
    return kExitInfrastructure;
  }
}

// The commit measured and where: the checkout itself, or a throwaway
// worktree of another commit (removed when this goes).
struct MeasuredCheckout {
  fs::path repo, checkout, worktree;
  std::string commit;

  MeasuredCheckout(const MeasuredCheckout&) = delete;
  MeasuredCheckout& operator=(const MeasuredCheckout&) = delete;
  explicit MeasuredCheckout(const RunArguments& args) : repo(fs::absolute(args.repo)), checkout(repo) {
    if (is_git_checkout(repo)) {
      commit = resolve_commit(repo, args.commit);
      if (commit == resolve_commit(repo, "HEAD")) {
        refuse_uncommitted_changes(repo, commit, args);
        return;
      }
      worktree =
          fs::temp_directory_path() / ("kw-run-" + commit.substr(0, 12) + "-" + std::to_string(getpid()));
      say("checking out " + commit.substr(0, 12) + " in " + worktree.string());
      add_worktree(repo, worktree, commit);
      checkout = worktree;
    } else if (common::is_commit_sha(args.commit)) {
      // A copy of a tree without its .git (e.g. shipped to a GPU host): the
      // caller names the commit it is.
      say(repo.string() + " is not a git checkout; measuring it as commit " + args.commit);
      commit = args.commit;
    } else {
      throw std::runtime_error(repo.string() +
                               " is not a git checkout: pass --commit with the 40-hex SHA it holds");
    }
  }
  ~MeasuredCheckout() {
    if (!worktree.empty()) remove_worktree(repo, worktree);
  }
};

PipelineOptions run_options(const RunArguments& args, const MeasuredCheckout& measured) {
  const fs::path& repo = measured.repo;
  PipelineOptions options;
  options.checkout = measured.checkout;
  options.commit = measured.commit;
  options.branch = !args.branch.empty()                                  ? args.branch
                   : measured.worktree.empty() && !is_git_checkout(repo) ? "main"
                                                                         : current_branch(repo);
  if (!args.base.empty())
    options.base_commit = common::is_commit_sha(args.base) ? args.base : resolve_commit(repo, args.base);
  options.agent_name = args.name.empty() ? host_name() : args.name;
  options.agent_host = host_name();
  if (!args.gpu_test_double.empty()) {
    say("GPU test double \"" + args.gpu_test_double + "\": benches run as if on a GPU");
    options.gpu_available = true;
  } else {
    GpuInventory gpus = detect_gpus();
    options.gpu_available = !gpus.models.empty();
    say(options.gpu_available ? "GPU: " + gpus.models.front() + " (" + gpus.source + ")"
                              : "no CUDA device (" + gpus.source + "): GPU stages will be skipped");
  }
  if (options.gpu_available) say(inject_library_line());
  options.stop = &stop_requested();
  options.log = say;
  options.only_stages = selected_stages(args.stages);
  if (!args.shard.empty()) options.shard = common::parse_shard_spec(args.shard);
  return options;
}

// An A/B run measures the base too: its build from the cache, or built
// there now. The cache holds the base's tree for this process while the
// returned object lives: another process's eviction passes over it.
std::unique_ptr<BuiltCommits> build_base(const RunArguments& args, const fs::path& repo,
                                         PipelineOptions& options) {
  const fs::path cache = user_built_cache(args.cache_dir);
  // The base builds in the cache go through ccache beside it; the
  // checkout's own build is the user's and left as it is configured.
  auto built = std::make_unique<BuiltCommits>(cache, args.cache_size, cache.parent_path() / "ccache");
  options.fingerprint_cache_dir = cache.parent_path() / "fingerprints";
  std::string why;
  options.base_checkout = built->get(repo, *options.base_commit, stop_requested(), say, why);
  if (!options.base_checkout)
    say("base: " + why + "; the server will compare with the stored history instead");
  return built;
}

int run_once(const RunArguments& args) {
  const MeasuredCheckout measured(args);
  const fs::path config_file =
      args.config.empty() ? measured.checkout / "kernelwatch.json" : fs::path(args.config);
  std::optional<RepoConfig> config;
  std::optional<ConfigError> config_error;
  try {
    config = load_repo_config(config_file);
  } catch (const ConfigError& error) {
    config_error = error;
  }
  PipelineOptions options = run_options(args, measured);
  std::unique_ptr<BuiltCommits> base_cache;
  if (config && options.base_commit && config->full_bench.ab &&
      full_bench_runs_here(*config, options.gpu_available) && is_git_checkout(measured.repo))
    base_cache = build_base(args, measured.repo, options);
  json report =
      config ? run_pipeline(*config, options)
             : config_failure_report(project_named_in(config_file, measured.repo), *config_error, options);
  // A configuration mistake fails here, at once, as it fails a job.
  const int done = config ? kExitOk : kExitPreflight;
  if (config_error) {
    std::cerr << "kw run: " << config_file.string() << ":\n";
    for (const std::string& problem : config_error->problems()) std::cerr << "  " << problem << "\n";
  }
  return deliver(report, args, measured.commit, done);
}

// The exit code of several verdicts: the gravest (no verdict, then a failed
// stage, then a regression).
int graver(int a, int b) {
  return std::max(a, b);
}

int upload(const std::vector<std::string>& files, ServerOptions server) {
  server.resolve();
  http::Client client(server.url, server.token);
  int code = kExitOk;
  for (const std::string& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    try {
      if (!in) throw std::runtime_error("cannot open");
      json document = json::parse(text.str());
      if (document.contains("target") && document.contains("report"))
        document = document["report"];  // a spool file
      common::parse_run_report(document);
      json answer = post_report(client, document);
      const std::int64_t run_id = answer.value("run_id", std::int64_t{0});
      std::cout << file << ": run " << run_id << ", verdict " << answer.value("verdict", std::string("?"))
                << (answer.value("duplicate", false) ? " (already stored)" : "") << "\n";
      code = graver(code, gate_run(client, server.url, run_id));
    } catch (const http::ConnectionError& error) {
      std::cerr << file << ": " << error.what() << "\n";
      return kExitInfrastructure;
    } catch (const std::exception& error) {
      // Not judged: no verdict, never the code of a regression.
      std::cerr << file << ": " << error.what() << "\n";
      code = graver(code, kExitInfrastructure);
    }
  }
  return code;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArguments>();
  auto* command =
      app.add_subcommand("run", "Build and benchmark one commit now (no job): report to a server or a file");
  command->add_option("--repo", args->repo, "repository checkout")->capture_default_str();
  command->add_option("--commit", args->commit, "commit to measure (a worktree is made when it is not HEAD)")
      ->capture_default_str();
  command->add_option("--branch", args->branch, "branch to record (default: the checkout's)");
  command->add_option(
      "--base", args->base,
      "base commit to compare with (a pull request's): built too, and measured alternately with "
      "the head in full_bench");
  command->add_option("--config", args->config, "repo config (default: <checkout>/kernelwatch.json)");
  command->add_option("--out", args->out, "write the report to this file instead of posting it");
  command->add_flag("--allow-dirty", args->allow_dirty,
                    "with --out: measure the checkout's uncommitted changes (refused otherwise)");
  command->add_option("--name", args->name, "agent name in the report (default: host name)");
  command->add_option(
      "--gpu-test-double", args->gpu_test_double,
      "TEST DOUBLE: run the benches as if this GPU model were present (CPU benches speaking kwbench)");
  command
      ->add_option("--stages", args->stages,
                   "run only these stages after build (the others are reported skipped), e.g. full_bench "
                   "to measure a commit again; several separated by spaces or commas")
      ->delimiter(',');
  command->add_option("--cache-dir", args->cache_dir,
                      "built commits kept for A/B bases (default: ~/.kw/built)");
  command
      ->add_option("--cache-size", args->cache_size, "built commits kept, least recently used evicted first")
      ->capture_default_str();
  command->add_option(
      "--shard", args->shard,
      "measure shard K of N of the cases (K/N, e.g. 1/2; with --out): run each shard on its own "
      "GPU, then kw merge-shards their reports into one run");
  args->server.add_to(*command);
  command->callback([args, &exit_code] {
    if (!args->shard.empty()) {
      common::parse_shard_spec(args->shard);  // a mistake before any build
      if (args->out.empty())
        throw CLI::ValidationError("--shard",
                                   "needs --out: one shard's report is no run; merge the shards' "
                                   "reports with kw merge-shards, then kw upload the run");
    }
    if (args->out.empty()) args->server.resolve();
    exit_code = run_once(*args);
  });
}

void add_upload_command(CLI::App& app, int& exit_code) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto server = std::make_shared<ServerOptions>();
  auto* command =
      app.add_subcommand("upload", "Post saved run reports (kw run --out, spool files) to a server");
  command->add_option("FILE", *files, "run report JSON files")->required();
  server->add_to(*command);
  command->callback([files, server, &exit_code] { exit_code = upload(*files, *server); });
}

}  // namespace kw::agent
