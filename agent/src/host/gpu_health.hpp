// Health of one GPU, checked between jobs by the worker that owns it: a
// GPU that fails stops claiming (kw-server refuses it jobs) and the agents
// page says why. Three checks: a CUDA context on it that runs a kernel, its
// SM clock under that kernel against its application clock, and its ECC
// state (uncorrected errors since the driver loaded, row remapping). NVML
// and the CUDA driver are loaded with dlopen: kw links neither.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct GpuCheck {
  std::string name;  // cuda_context, clocks, ecc
  bool passed = false;
  std::string message;
};

struct GpuHealth {
  std::string uuid;
  int index = -1;
  std::string model;
  std::vector<GpuCheck> checks;

  bool healthy() const;
  std::string failures() const;  // "ecc: ...; clocks: ..." of the failed checks
  nlohmann::json to_json() const;
  // Throws std::runtime_error naming what is wrong.
  static GpuHealth from_json(const nlohmann::json& value);
};

// The checks of the GPU this process's CUDA_VISIBLE_DEVICES names (device
// 0 as CUDA sees it), the UUID it should have, its NVML index and model.
// `load_seconds`: how long the kernel that brings the clock up runs.
GpuHealth check_pinned_gpu(const std::string& uuid, int index, const std::string& model, double load_seconds);

// `kw gpu-check`.

// One GPU's health as a worker sees it: `kw gpu-check --gpu UUID --json` in
// a child process (a GPU that hangs or crashes the driver takes only that
// process), or `command` (kernelwatch.json-independent, from `kw agent
// --gpu-check`) through the shell with KW_GPU_UUID and KW_GPU_INDEX set,
// printing the same JSON. A check that gives no result is a failed check.
// A check prints its result as the last line of its output.
nlohmann::json last_line_json(std::string output);

GpuHealth check_gpu_in_child(const std::string& uuid, int index, const std::string& model,
                             const std::string& command);

}  // namespace kw::agent
