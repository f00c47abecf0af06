// kw gpu-check (this host's GPUs, as kw agent checks them between jobs),
// kw harness-path (where kwbench.py is written for Python benches) and
// kw doctor (what this host gives kernelwatch).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "host/gpu_health.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/python_harness.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace {

using nlohmann::json;

struct GpuCheckOptions {
  std::vector<std::string> gpus;  // UUIDs or NVML indices; empty: every GPU
  bool json = false;
  bool pinned = false;  // internal: this process's CUDA_VISIBLE_DEVICES already names the one GPU
  double load_seconds = 0.4;
};

// The child's side: one GPU, named by the parent; CUDA_VISIBLE_DEVICES
// already holds its UUID.
int check_pinned(const GpuCheckOptions& options) {
  const std::string uuid = options.gpus.empty() ? std::string() : options.gpus.front();
  GpuInventory inventory = detect_gpus();
  int index = -1;
  std::string model;
  for (std::size_t i = 0; i < inventory.uuids.size(); ++i) {
    if (inventory.uuids[i] != uuid) continue;
    index = static_cast<int>(i);
    model = inventory.models[i];
  }
  GpuHealth health = check_pinned_gpu(uuid, index, model, options.load_seconds);
  std::cout << health.to_json().dump() << std::endl;
  return health.healthy() ? kExitOk : kExitInvalid;
}

// Each GPU is checked in a child of its own, so a driver that crashes or
// hangs the process holding the context fails that GPU's check, not kw.
int run_gpu_check(const GpuCheckOptions& options) {
  if (options.pinned) return check_pinned(options);
  GpuInventory inventory = detect_gpus();
  if (inventory.uuids.empty()) {
    std::cerr << "kw gpu-check: no GPU (" << inventory.source << ")" << std::endl;
    return kExitInfrastructure;
  }
  std::vector<std::size_t> chosen;
  for (const std::string& wanted : options.gpus) {
    bool found = false;
    for (std::size_t i = 0; i < inventory.uuids.size(); ++i) {
      if (inventory.uuids[i] == wanted || std::to_string(i) == wanted) {
        chosen.push_back(i);
        found = true;
      }
    }
    if (!found) {
      std::cerr << "kw gpu-check: --gpu " << wanted << ": no such GPU (UUIDs and indices 0-"
                << inventory.uuids.size() - 1 << " from " << inventory.source << ")" << std::endl;
      return kExitUsage;
    }
  }
  if (options.gpus.empty()) {
    for (std::size_t i = 0; i < inventory.uuids.size(); ++i) chosen.push_back(i);
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  json all = json::array();
  bool healthy = true;
  for (std::size_t i : chosen) {
    const std::string& uuid = inventory.uuids[i];
    common::ChildSpec spec;
    spec.argv = {
        ec ? std::string("kw") : self.string(), "gpu-check", "--pinned", "--gpu", uuid, "--load-seconds",
        std::to_string(options.load_seconds)};
    spec.env = {{"CUDA_VISIBLE_DEVICES", uuid}};
    spec.timeout_s = 60 + 4 * options.load_seconds;
    common::ChildOutcome outcome = common::run_child(spec);
    GpuHealth health;
    try {
      health = GpuHealth::from_json(last_line_json(outcome.output_tail));
    } catch (const std::exception& error) {
      // The driver crashed or hung the process that held the context.
      health = {uuid,
                static_cast<int>(i),
                inventory.models[i],
                {{"cuda_context", false, "the check's process " + outcome.describe() + ": " + error.what()}}};
    }
    healthy = healthy && health.healthy();
    all.push_back(health.to_json());
    if (!options.json) {
      std::cout << "GPU " << i << " " << uuid << " (" << inventory.models[i]
                << "): " << (health.healthy() ? "healthy" : "UNHEALTHY") << "\n";
      for (const GpuCheck& check : health.checks)
        std::cout << "  " << (check.passed ? "ok    " : "FAILED") << " " << check.name << ": "
                  << check.message << "\n";
    }
  }
  if (options.json) std::cout << (all.size() == 1 ? all[0] : all).dump() << std::endl;
  return healthy ? kExitOk : kExitInvalid;
}

// One line of kw doctor: what was found, or what is missing and what that costs.
struct DoctorLine {
  bool ok = true;
  std::string what;
  std::string found;
};

// What a python bench's interpreter has: its version and torch's and
// Triton's, or why it does not run.
DoctorLine python_line(const BenchConfig& bench, const std::filesystem::path& repo) {
  const std::string interpreter = bench_command(bench, repo).front();
  common::ChildSpec spec;
  spec.argv = {
      interpreter, "-c",
      "import importlib, sys\n"
      "found = ['python ' + sys.version.split()[0]]\n"
      "for name in ('torch', 'triton'):\n"
      "    try:\n"
      "        found.append(name + ' ' + str(getattr(importlib.import_module(name), '__version__', '?')))\n"
      "    except Exception as error:\n"
      "        found.append(name + ' MISSING (' + type(error).__name__ + ')')\n"
      "print(', '.join(found))\n"};
  spec.cwd = repo;
  spec.timeout_s = 120;
  const common::ChildOutcome outcome = common::run_child(spec);
  DoctorLine line{true, "bench " + bench.name + " (" + interpreter + ")", ""};
  if (!outcome.ok()) {
    line.ok = false;
    line.found = interpreter + " " + outcome.describe() + ": the bench cannot run here";
    return line;
  }
  std::string printed = outcome.output_tail;
  while (!printed.empty() && (printed.back() == '\n' || printed.back() == '\r')) printed.pop_back();
  if (const auto last = printed.rfind('\n'); last != std::string::npos) printed = printed.substr(last + 1);
  line.found = printed;
  // kwbench.py's torch backend, and every form of a repository's own benchmarks, import torch.
  if (printed.find("torch MISSING") != std::string::npos) {
    line.ok = false;
    line.found += ": kwbench.py's torch backend cannot run";
  }
  return line;
}

// What this host gives kernelwatch, a line each, and for the repository's
// python benches what their interpreters import. Exit 0 when nothing is missing.
int run_doctor(const std::filesystem::path& repo_given) {
  std::error_code ec;
  const std::filesystem::path repo = std::filesystem::absolute(repo_given, ec);
  std::vector<DoctorLine> lines;
  const GpuInventory gpus = detect_gpus();
  if (gpus.models.empty()) {
    lines.push_back({false, "GPU", "none (" + gpus.source + "): every GPU stage is skipped"});
  } else {
    std::string models;
    for (const std::string& model : gpus.models) models += (models.empty() ? "" : ", ") + model;
    lines.push_back(
        {true, "GPU", std::to_string(gpus.models.size()) + " (" + models + "; " + gpus.source + ")"});
  }
  const std::optional<std::filesystem::path> inject = find_inject_library();
  lines.push_back({inject.has_value(), "libkw_inject.so", inject ? inject->string() : inject_library_line()});
  const struct {
    const char* tool;
    const char* without;
  } tools[] = {{"cuobjdump", "load cannot check kernel images against this GPU"},
               {"compute-sanitizer", "a bench's sanitize tools cannot run"},
               {"ncu", "kw profile cannot run"}};
  for (const auto& [tool, without] : tools) {
    const std::filesystem::path path = find_cuda_tool(tool);
    lines.push_back(
        {!path.empty(), tool, path.empty() ? std::string("not found: ") + without : path.string()});
  }
  common::ChildSpec git;
  git.argv = {"git", "--version"};
  git.timeout_s = 30;
  const bool has_git = common::run_child(git).ok();
  lines.push_back(
      {has_git, "git", has_git ? "runs" : "not found: kw run and kw agent check commits out with it"});
  lines.push_back({true, "kwbench.py", python_harness_dir().string()});
  const std::filesystem::path config = repo / "kernelwatch.json";
  if (std::filesystem::exists(config, ec)) {
    try {
      const RepoConfig parsed = load_repo_config(config);
      for (const BenchConfig& bench : parsed.benches)
        if (bench.format == BenchFormat::python) lines.push_back(python_line(bench, repo));
    } catch (const std::exception& error) {
      lines.push_back({false, config.string(), error.what()});
    }
  }
  bool healthy = true;
  for (const DoctorLine& line : lines) {
    std::cout << (line.ok ? "ok      " : "MISSING ") << line.what << ": " << line.found << "\n";
    healthy = healthy && line.ok;
  }
  return healthy ? kExitOk : kExitInvalid;
}

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto repo = std::make_shared<std::string>(".");
  auto* command = app.add_subcommand(
      "doctor",
      "Say what this host gives kernelwatch (GPUs, libkw_inject.so, the CUDA tools, git, and what the "
      "repository's python benches import), a line each; exit 1 when something is missing");
  command->add_option("--repo", *repo, "the repository whose kernelwatch.json names the benches")
      ->capture_default_str();
  command->callback([repo, &exit_code] { exit_code = run_doctor(*repo); });
}

void add_gpu_check_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<GpuCheckOptions>();
  auto* command = app.add_subcommand(
      "gpu-check",
      "Check this host's GPUs as kw agent does between jobs: a CUDA context that runs a kernel, "
      "the SM clock under it against the application clock, ECC errors and row remapping");
  command->add_option("--gpu", options->gpus, "a GPU's UUID or NVML index (repeatable; default: every GPU)");
  command->add_flag("--json", options->json, "print the result as JSON");
  command
      ->add_option("--load-seconds", options->load_seconds,
                   "how long the kernel runs while the clock is read")
      ->check(CLI::Range(0.05, 10.0))
      ->capture_default_str();
  command->add_flag("--pinned", options->pinned)->group("");  // internal: CUDA_VISIBLE_DEVICES names the GPU
  command->callback([options, &exit_code] { exit_code = run_gpu_check(*options); });
}

void add_harness_path_command(CLI::App& app, int& exit_code) {
  auto* command = app.add_subcommand(
      "harness-path", "Print the folder holding kwbench.py (written there first), for PYTHONPATH by hand");
  command->callback([&exit_code] {
    std::cout << python_harness_dir().string() << "\n";
    exit_code = kExitOk;
  });
}

}  // namespace kw::agent
