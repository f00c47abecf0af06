// `kw run` over a repository made for one GPU test: a git repository holding
// only a kernelwatch.json, whose benches name executables and scripts
// elsewhere by absolute path (tests only; links CUDA::cudart).
#pragma once

#include <cuda_runtime.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "subprocess.hpp"
#include "temp_dir.hpp"

namespace kw::testing {

inline bool has_cuda_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// The report of `kw run --stages STAGES` (comma-separated) over `config`;
// null, with a test failure saying why, when kw wrote none.
inline nlohmann::json kw_run_report(const nlohmann::json& config, const std::string& stages) {
  const std::filesystem::path repo = make_temp_dir("kw-gpu-test-repo");
  std::ofstream(repo / "kernelwatch.json") << config.dump(2);
  run_command({"git", "-C", repo.string(), "init", "-q"});
  run_command({"git", "-C", repo.string(), "add", "-A"});
  run_command({"git", "-C", repo.string(), "-c", "user.name=kw", "-c", "user.email=kw@localhost", "commit",
               "-qm", "bench"});
  const std::filesystem::path out = repo / "report.json";
  auto result =
      run_command({KW_BINARY, "run", "--repo", repo.string(), "--stages", stages, "--out", out.string()});
  nlohmann::json report;
  if (std::ifstream in(out); in) report = nlohmann::json::parse(in);
  std::filesystem::remove_all(repo);
  if (report.is_null()) ADD_FAILURE() << "kw run wrote no report: " << result.output;
  return report;
}

inline const nlohmann::json& stage_of(const nlohmann::json& report, const std::string& name) {
  static const nlohmann::json none;
  if (!report.contains("stages")) return none;
  for (const nlohmann::json& stage : report["stages"])
    if (stage["name"] == name) return stage;
  return none;
}

}  // namespace kw::testing
