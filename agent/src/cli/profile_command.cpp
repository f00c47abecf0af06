// kw profile: why one case got slower, from the hardware's counters. Builds
// the head commit (and a base), runs the case under Nsight Compute (ncu) in
// each, and tabulates per kernel what changed: time, SM and memory
// throughput, achieved occupancy, and the top warp-stall reasons. The raw
// ncu CSV of each side is kept beside the summary (profile.json,
// profile.md). An agent's profile job does the same for kw-server.
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/profile_summary.hpp"
#include "pipeline/profiling.hpp"
#include "project/built_commits.hpp"
#include "project/git.hpp"

namespace kw::agent {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ProfileArguments {
  ProfileTarget target;
  std::string repo = ".";
  std::string head = "HEAD";
  std::string base;
  std::string out = "kw-profile";
  std::string cache_dir;
};

int profile(ProfileArguments args) {
  if (args.target.ncu.empty()) args.target.ncu = find_cuda_tool("ncu");
  if (args.target.ncu.empty())
    throw std::runtime_error("ncu (Nsight Compute) not found in PATH or CUDA's bin: kw profile needs it");
  const fs::path repo = fs::absolute(args.repo);
  const fs::path out = fs::absolute(args.out);
  const fs::path cache = user_built_cache(args.cache_dir);
  BuiltCommits built(cache, 8, cache.parent_path() / "ccache");
  std::vector<ProfiledCommit> commits;
  if (!args.base.empty()) commits.push_back({"base", resolve_commit(repo, args.base), {}});
  commits.push_back({"head", resolve_commit(repo, args.head), {}});
  for (ProfiledCommit& commit : commits) {
    say(commit.side + ": commit " + commit.commit.substr(0, 12));
    std::string why;
    const std::optional<fs::path> tree = built.get(repo, commit.commit, stop_requested(), say, why);
    if (!tree) throw std::runtime_error(commit.side + ": " + why);
    commit.tree = *tree;
  }
  const json summary = profile_commits(args.target, commits, out, stop_requested());
  std::ofstream(out / "profile.json") << summary.dump(2) << "\n";
  const std::string table = profile_markdown(summary);
  std::ofstream(out / "profile.md") << table;
  std::cout << table << std::flush;
  say("profile of " + args.target.case_name + " written to " + out.string() +
      " (profile.json, profile.md, the raw ncu CSV)");
  return kExitOk;
}

}  // namespace

void add_profile_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ProfileArguments>();
  auto* command = app.add_subcommand("profile",
                                     "Profile one case with Nsight Compute in the head commit (and a base): "
                                     "per kernel its time, SM and memory "
                                     "throughput, achieved occupancy and top warp stalls, side by side");
  command->add_option("--repo", args->repo, "the git checkout")->capture_default_str();
  command->add_option("--commit", args->head, "the head commit")->capture_default_str();
  command->add_option("--base", args->base, "the commit to compare with (e.g. the regression's baseline)");
  command->add_option("--case", args->target.case_name, "the case to profile")->required();
  command->add_option("--bench", args->target.bench,
                      "the bench that has the case (default: the kwbench or python bench that lists it)");
  command->add_option("--kernel", args->target.kernel, "profile only kernels whose name matches this regex");
  command->add_option("--launch-count", args->target.launch_count, "kernel launches profiled per side")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--ncu", args->target.ncu,
                      "the Nsight Compute CLI (default: ncu in PATH or CUDA's bin)");
  command->add_option("--out", args->out, "where profile.json, profile.md and the CSVs go")
      ->capture_default_str();
  command->add_option("--cache-dir", args->cache_dir, "built commits (default ~/.kw/built)");
  command->callback([args, &exit_code] { exit_code = profile(*args); });
}

}  // namespace kw::agent
