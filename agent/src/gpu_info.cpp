#include "gpu_info.hpp"

#include <dlfcn.h>

#include <atomic>
#include <sstream>

#include "kw/common/subprocess.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;
using common::shell;

namespace {

bool from_nvml(GpuInventory& inventory) {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return false;
  using Init = int (*)();
  using Count = int (*)(unsigned*);
  using Handle = int (*)(unsigned, void**);
  using Name = int (*)(void*, char*, unsigned);
  auto init = reinterpret_cast<Init>(dlsym(library, "nvmlInit_v2"));
  auto count = reinterpret_cast<Count>(dlsym(library, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<Handle>(dlsym(library, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<Name>(dlsym(library, "nvmlDeviceGetName"));
  auto shutdown = reinterpret_cast<Init>(dlsym(library, "nvmlShutdown"));
  bool ok = init && count && handle && name && init() == 0;
  if (ok) {
    unsigned devices = 0;
    ok = count(&devices) == 0;
    for (unsigned i = 0; ok && i < devices; ++i) {
      void* device = nullptr;
      char text[96] = {};
      if (handle(i, &device) == 0 && name(device, text, sizeof(text)) == 0)
        inventory.models.emplace_back(text);
    }
    if (shutdown) shutdown();
  }
  dlclose(library);
  if (ok) inventory.source = "nvml";
  return ok;
}

}  // namespace

GpuInventory detect_gpus() {
  GpuInventory inventory;
  if (from_nvml(inventory)) return inventory;
  ChildSpec spec;
  spec.argv = {"nvidia-smi", "--query-gpu=name", "--format=csv,noheader"};
  spec.timeout_s = 20;
  ChildOutcome outcome = run_child(spec);
  if (outcome.ok()) {
    std::istringstream lines(outcome.output_tail);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty()) inventory.models.push_back(line);
    }
    inventory.source = "nvidia-smi";
  } else {
    inventory.source = "no NVML library and no working nvidia-smi";
  }
  return inventory;
}

}  // namespace kw::agent
