#include "host/gpu_info.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "kw/common/nvml.hpp"
#include "kw/common/subprocess.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;

namespace {

bool from_nvml(GpuInventory& inventory) {
  const common::Nvml nvml;
  const std::optional<unsigned> devices = nvml.device_count();
  if (!devices) return false;
  for (unsigned i = 0; i < *devices; ++i) {
    void* device = nvml.device_by_index(i);
    std::string name = nvml.device_name(device), uuid = nvml.device_uuid(device);
    if (name.empty() || uuid.empty()) continue;
    inventory.models.push_back(std::move(name));
    inventory.uuids.push_back(std::move(uuid));
  }
  inventory.source = "nvml";
  return true;
}

}  // namespace

GpuInventory detect_gpus() {
  GpuInventory inventory;
  if (from_nvml(inventory)) return inventory;
  ChildSpec spec;
  spec.argv = {"nvidia-smi", "--query-gpu=uuid,name", "--format=csv,noheader"};
  spec.timeout_s = 20;
  ChildOutcome outcome = run_child(spec);
  if (outcome.ok()) {
    std::istringstream lines(outcome.output_tail);
    std::string line;
    while (std::getline(lines, line)) {
      const auto comma = line.find(", ");
      if (comma == std::string::npos) continue;
      inventory.uuids.push_back(line.substr(0, comma));
      inventory.models.push_back(line.substr(comma + 2));
    }
    inventory.source = "nvidia-smi";
  } else {
    inventory.source = "no NVML library and no working nvidia-smi";
  }
  return inventory;
}

nlohmann::json host_cpu_device() {
  std::string model;
  if (std::ifstream cpuinfo("/proc/cpuinfo"); cpuinfo) {
    for (std::string line; std::getline(cpuinfo, line);) {
      if (line.rfind("model name", 0) != 0) continue;
      auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  std::int64_t memory_kib = 0;
  if (std::ifstream meminfo("/proc/meminfo"); meminfo) {
    for (std::string key; meminfo >> key;) {
      if (key == "MemTotal:") {
        meminfo >> memory_kib;
        break;
      }
      meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
  }
  nlohmann::json device{{"kind", "cpu"},
                        {"name", model.empty() ? std::string("unknown CPU") : model},
                        {"memory_bytes", std::max<std::int64_t>(memory_kib * 1024, 1)}};
  if (unsigned cores = std::thread::hardware_concurrency(); cores > 0) device["sm_count"] = cores;
  return device;
}

nlohmann::json host_gpu_device() {
  // Loaded once and kept: after cuInit the driver is not safe to unload, and
  // `kw agent` asks again for every job.
  static void* const library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  // The driver API's types, as ints: CUresult, CUdevice, CUdevice_attribute.
  using Init = int (*)(unsigned);
  using Get = int (*)(int*, int);
  using Name = int (*)(char*, int, int);
  using Memory = int (*)(std::size_t*, int);
  using Attribute = int (*)(int*, int, int);
  auto init = reinterpret_cast<Init>(dlsym(library, "cuInit"));
  auto get = reinterpret_cast<Get>(dlsym(library, "cuDeviceGet"));
  auto name = reinterpret_cast<Name>(dlsym(library, "cuDeviceGetName"));
  auto memory = reinterpret_cast<Memory>(dlsym(library, "cuDeviceTotalMem_v2"));
  auto attribute = reinterpret_cast<Attribute>(dlsym(library, "cuDeviceGetAttribute"));
  enum { kSmCount = 16, kL2Bytes = 38, kMajor = 75, kMinor = 76 };
  nlohmann::json device = nullptr;
  int handle = 0, sm_count = 0, l2_bytes = 0, major = 0, minor = 0;
  char text[256] = {};
  std::size_t bytes = 0;
  if (init && get && name && memory && attribute && init(0) == 0 && get(&handle, 0) == 0 &&
      name(text, sizeof(text), handle) == 0 && memory(&bytes, handle) == 0 &&
      attribute(&sm_count, kSmCount, handle) == 0 && attribute(&l2_bytes, kL2Bytes, handle) == 0 &&
      attribute(&major, kMajor, handle) == 0 && attribute(&minor, kMinor, handle) == 0 && bytes > 0 &&
      sm_count > 0) {
    device = {{"kind", "gpu"},
              {"name", text},
              {"compute_capability", std::to_string(major) + "." + std::to_string(minor)},
              {"memory_bytes", static_cast<std::int64_t>(bytes)},
              {"sm_count", sm_count},
              {"l2_bytes", l2_bytes}};
    if (std::string driver = common::Nvml().driver_version(); !driver.empty()) device["driver"] = driver;
  }
  return device;
}

}  // namespace kw::agent
