// kw profile: why one case got slower, from the hardware's counters. Builds
// the head commit (and a base), runs the case under Nsight Compute (ncu) in
// each, and tabulates per kernel what changed: time, SM and memory
// throughput, achieved occupancy, and the top warp-stall reasons. The raw
// ncu CSV of each side is kept beside the summary (profile.json,
// profile.md).
#include <algorithm>
#include <fstream>
#include <iostream>

#include "built_commits.hpp"
#include "commands.hpp"
#include "git.hpp"
#include "kw/common/subprocess.hpp"
#include "load_check.hpp"
#include "profile_summary.hpp"
#include "repo_config.hpp"

namespace kw::agent {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ProfileArguments {
  std::string repo = ".";
  std::string head = "HEAD";
  std::string base;
  std::string case_name;
  std::string bench;
  std::string kernel;
  std::string out = "kw-profile";
  std::string cache_dir;
  int launch_count = 10;
};

// The bench that runs the case: the one named, else the first that speaks
// kwbench's command line (kwbench, or a python bench through kwbench.py).
const BenchConfig& bench_of(const RepoConfig& config, const std::string& name) {
  for (const BenchConfig& bench : config.benches) {
    const bool kwbench_cli = bench.format == BenchFormat::kwbench || bench.format == BenchFormat::python;
    if (name.empty() ? kwbench_cli : bench.name == name) {
      if (!kwbench_cli)
        throw std::runtime_error(
            "bench " + bench.name +
            ": kw profile runs one case of a kwbench or python bench, not of this format");
      return bench;
    }
  }
  throw std::runtime_error(name.empty() ? "kernelwatch.json names no kwbench or python bench"
                                        : "kernelwatch.json has no bench named " + name);
}

json profile_side(const ProfileArguments& args, const fs::path& ncu, const fs::path& tree,
                  const std::string& side, const fs::path& out) {
  const RepoConfig config = load_repo_config(tree / "kernelwatch.json");
  const BenchConfig& bench = bench_of(config, args.bench);
  const fs::path result = out / (side + "-bench.json");
  common::ChildSpec spec;
  // --clock-control none: ncu would otherwise lock the GPU to its base
  // clocks while it profiles, and a shared GPU host's clocks are not ours.
  spec.argv = {ncu.string(),
               "--csv",
               "--page",
               "raw",
               "--target-processes",
               "all",
               "--clock-control",
               "none",
               "--launch-count",
               std::to_string(args.launch_count),
               "--metrics",
               kProfileMetrics};
  if (!args.kernel.empty()) spec.argv.insert(spec.argv.end(), {"--kernel-name", "regex:" + args.kernel});
  for (std::string& part : bench_command(bench, tree)) spec.argv.push_back(std::move(part));
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  // A few samples: each profiled launch is replayed once per counter pass.
  spec.argv.insert(spec.argv.end(), {"--stage", "full_bench", "--case", args.case_name, "--impls",
                                     "candidate", "--max-seconds", "0.05", "--min-samples", "3",
                                     "--max-samples", "3", "--json", result.string()});
  spec.cwd = tree;
  spec.timeout_s = config.timeout_for(common::StageName::full_bench) + 600;
  spec.tail_bytes = std::size_t{32} * 1024 * 1024;
  say(side + ": " + bench.name + " --case " + args.case_name + " under ncu");
  common::ChildOutcome outcome = common::run_child(spec, stop_requested());
  if (!outcome.ok())
    throw std::runtime_error(side + ": the bench under ncu " + outcome.describe() + ":\n" +
                             outcome.output_tail.substr(
                                 outcome.output_tail.size() > 4000 ? outcome.output_tail.size() - 4000 : 0));
  const std::string csv = ncu_csv_of(outcome.output_tail);
  std::ofstream(out / (side + ".csv")) << csv;
  json kernels = summarize_ncu_csv(csv);
  if (kernels.empty())
    throw std::runtime_error(side + ": ncu profiled no kernel of " + args.case_name +
                             (args.kernel.empty() ? "" : " matching --kernel " + args.kernel) +
                             " (its output: " + out.string() + "/" + side + ".csv)");
  return kernels;
}

int profile(const ProfileArguments& args) {
  const fs::path ncu = find_cuda_tool("ncu");
  if (ncu.empty())
    throw std::runtime_error("ncu (Nsight Compute) not found in PATH or CUDA's bin: kw profile needs it");
  const fs::path repo = fs::absolute(args.repo);
  const fs::path out = fs::absolute(args.out);
  fs::create_directories(out);
  const fs::path cache = user_built_cache(args.cache_dir);
  BuiltCommits built(cache, 8, cache.parent_path() / "ccache");
  json summary{{"case", args.case_name}, {"ncu", ncu.string()}, {"launch_count", args.launch_count}};
  std::vector<std::pair<std::string, std::string>> sides;
  if (!args.base.empty()) sides.emplace_back("base", resolve_commit(repo, args.base));
  sides.emplace_back("head", resolve_commit(repo, args.head));
  for (const auto& [side, commit] : sides) {
    say(side + ": commit " + commit.substr(0, 12));
    std::string why;
    const std::optional<fs::path> tree = built.get(repo, commit, stop_requested(), say, why);
    if (!tree)
      throw std::runtime_error(
          side.substr().append(" ").append(commit.substr(0, 12)).append(": ").append(why));
    summary[side] = {{"commit", commit}, {"kernels", profile_side(args, ncu, *tree, side, out)}};
  }
  std::ofstream(out / "profile.json") << summary.dump(2) << "\n";
  const std::string table = profile_markdown(summary);
  std::ofstream(out / "profile.md") << table;
  std::cout << table << std::flush;
  say("profile of " + args.case_name + " written to " + out.string() +
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
  command->add_option("--case", args->case_name, "the case to profile")->required();
  command->add_option("--bench", args->bench, "the bench that has the case (default: the first kwbench one)");
  command->add_option("--kernel", args->kernel, "profile only kernels whose name matches this regex");
  command->add_option("--launch-count", args->launch_count, "kernel launches profiled per side")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--out", args->out, "where profile.json, profile.md and the CSVs go")
      ->capture_default_str();
  command->add_option("--cache-dir", args->cache_dir, "built commits (default ~/.kw/built)");
  command->callback([args, &exit_code] { exit_code = profile(*args); });
}

}  // namespace kw::agent
