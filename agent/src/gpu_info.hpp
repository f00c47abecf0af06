// The GPUs of this host, for registration and job matching: NVML through
// dlopen (no link dependency), nvidia-smi as the fallback.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct GpuInventory {
  std::vector<std::string> models;  // one entry per GPU, e.g. "NVIDIA H100 80GB HBM3"
  std::string source;               // "nvml", "nvidia-smi", or why none was found
};

GpuInventory detect_gpus();

// This host's CPU as a run report's device ({"kind": "cpu", "name", "memory_bytes",
// "sm_count": logical cores}), from /proc/cpuinfo and /proc/meminfo.
nlohmann::json host_cpu_device();

}  // namespace kw::agent
