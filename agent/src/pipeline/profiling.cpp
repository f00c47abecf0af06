#include "pipeline/profiling.hpp"

#include <fstream>

#include "host/process.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/profile_summary.hpp"
#include "pipeline/python_harness.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool speaks_kwbench(const BenchConfig& bench) {
  return bench.format == BenchFormat::kwbench || bench.format == BenchFormat::python;
}

// Whether `--list` of the bench names the case.
bool lists_case(const BenchConfig& bench, const fs::path& tree, const std::string& case_name,
                const RepoConfig& config) {
  common::ChildSpec spec;
  spec.argv = bench_command(bench, tree);
  spec.env = bench_env(bench);
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  spec.argv.emplace_back("--list");
  spec.cwd = tree;
  spec.timeout_s = config.timeout_for(common::StageName::load);
  common::ChildOutcome outcome = common::run_child(spec);
  if (!outcome.ok()) return false;
  return ("\n" + outcome.output_tail + "\n").find("\n" + case_name + "\n") != std::string::npos;
}

// The bench that runs the case: the one named, else the only one that speaks
// kwbench's command line (kwbench, or a python bench through kwbench.py),
// else the one of those whose --list has the case.
const BenchConfig& bench_of(const RepoConfig& config, const ProfileTarget& target, const fs::path& tree) {
  std::vector<const BenchConfig*> candidates;
  for (const BenchConfig& bench : config.benches) {
    if (!target.bench.empty() && bench.name != target.bench) continue;
    if (!speaks_kwbench(bench)) {
      if (!target.bench.empty())
        throw std::runtime_error(
            "bench " + bench.name +
            ": a profile runs one case of a kwbench or python bench, not of this format");
      continue;
    }
    candidates.push_back(&bench);
  }
  if (candidates.empty())
    throw std::runtime_error(target.bench.empty() ? "kernelwatch.json names no kwbench or python bench"
                                                  : "kernelwatch.json has no bench named " + target.bench);
  if (candidates.size() == 1) return *candidates.front();
  for (const BenchConfig* bench : candidates) {
    if (lists_case(*bench, tree, target.case_name, config)) return *bench;
  }
  throw std::runtime_error("no bench of kernelwatch.json lists the case " + target.case_name);
}

json profile_side(const ProfileTarget& target, const ProfiledCommit& commit, const fs::path& out,
                  const std::atomic<bool>& stop, bool* permission_denied) {
  const RepoConfig config = load_repo_config(commit.tree / "kernelwatch.json");
  const BenchConfig& bench = bench_of(config, target, commit.tree);
  const std::string& side = commit.side;
  const fs::path result = out / (side + "-bench.json");
  common::ChildSpec spec;
  // --clock-control none: ncu would otherwise lock the GPU to its base
  // clocks while it profiles, and a shared GPU host's clocks are not ours.
  spec.argv = {target.ncu.string(),
               "--csv",
               "--page",
               "raw",
               "--target-processes",
               "all",
               "--clock-control",
               "none",
               "--launch-count",
               std::to_string(target.launch_count),
               "--metrics",
               kProfileMetrics};
  if (!target.kernel.empty()) spec.argv.insert(spec.argv.end(), {"--kernel-name", "regex:" + target.kernel});
  for (std::string& part : bench_command(bench, commit.tree)) spec.argv.push_back(std::move(part));
  spec.env = bench_env(bench);
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  // A few samples: each profiled launch is replayed once per counter pass.
  spec.argv.insert(spec.argv.end(), {"--stage", "full_bench", "--case", target.case_name, "--impls",
                                     "candidate", "--max-seconds", "0.05", "--min-samples", "3",
                                     "--max-samples", "3", "--json", result.string()});
  spec.cwd = commit.tree;
  spec.timeout_s = config.timeout_for(common::StageName::full_bench) + 600;
  spec.tail_bytes = std::size_t{32} * 1024 * 1024;
  say(side + " " + commit.commit.substr(0, 12) + ": " + bench.name + " --case " + target.case_name +
      " under ncu");
  common::ChildOutcome outcome = common::run_child(spec, stop);
  const std::string& output = outcome.output_tail;
  if (permission_denied != nullptr && output.find("ERR_NVGPUCTRPERM") != std::string::npos)
    *permission_denied = true;
  if (!outcome.ok())
    throw std::runtime_error(side + ": the bench under ncu " + outcome.describe() + ":\n" +
                             output.substr(output.size() > 4000 ? output.size() - 4000 : 0));
  const std::string csv = ncu_csv_of(output);
  std::ofstream(out / (side + ".csv")) << csv;
  json kernels = summarize_ncu_csv(csv);
  if (kernels.empty())
    throw std::runtime_error(side + ": ncu profiled no kernel of " + target.case_name +
                             (target.kernel.empty() ? "" : " matching --kernel " + target.kernel) +
                             (output.find("ERR_NVGPUCTRPERM") != std::string::npos
                                  ? " (ncu may not read this GPU's performance counters: ERR_NVGPUCTRPERM)"
                                  : ""));
  return kernels;
}

}  // namespace

json profile_commits(const ProfileTarget& target, const std::vector<ProfiledCommit>& commits,
                     const fs::path& out, const std::atomic<bool>& stop, bool* permission_denied) {
  fs::create_directories(out);
  json summary{
      {"case", target.case_name}, {"ncu", target.ncu.string()}, {"launch_count", target.launch_count}};
  for (const ProfiledCommit& commit : commits) {
    if (stop) throw std::runtime_error("stopped before the " + commit.side + " profile");
    summary[commit.side] = {{"commit", commit.commit},
                            {"kernels", profile_side(target, commit, out, stop, permission_denied)}};
  }
  return summary;
}

}  // namespace kw::agent
