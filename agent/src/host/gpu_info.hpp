// The GPUs of this host, for registration and job matching: NVML through
// dlopen (no link dependency), nvidia-smi as the fallback.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kw::agent {

struct GpuInventory {
  std::vector<std::string> models;  // one entry per GPU, e.g. "NVIDIA H100 80GB HBM3"
  std::vector<std::string> uuids;   // "GPU-8f3a...", in NVML's index order as models
  std::string source;               // "nvml", "nvidia-smi", or why none was found
};

GpuInventory detect_gpus();

// This host's CPU as a run report's device ({"kind": "cpu", "name", "memory_bytes",
// "sm_count": logical cores}), from /proc/cpuinfo and /proc/meminfo.
nlohmann::json host_cpu_device();

// The GPU a bench ran on, for a bench whose output does not say (Google
// Benchmark; NVBench output without its devices section): device 0 as the
// CUDA driver sees it, through dlopen of libcuda (so CUDA_VISIBLE_DEVICES
// picks it as it picks the bench's), with NVML's driver version. Null where
// there is no driver or no device.
nlohmann::json host_gpu_device();

}  // namespace kw::agent
