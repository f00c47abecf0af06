#include "kw/common/nvml.hpp"

#include <dlfcn.h>

namespace kw::common {

Nvml::Nvml() : library_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
  if (library_ == nullptr) {
    const char* reason = dlerror();
    why_ = std::string("NVML unavailable: ") + (reason ? reason : "no libnvidia-ml.so.1");
    return;
  }
  auto init = reinterpret_cast<int (*)()>(symbol("nvmlInit_v2"));
  if (init == nullptr) {
    why_ = "NVML unavailable: libnvidia-ml.so.1 has no nvmlInit_v2";
    return;
  }
  if (int status = init(); status != 0) {
    why_ = "nvmlInit_v2 failed: " + error(status);
    return;
  }
  initialised_ = true;
}

Nvml::~Nvml() {
  if (initialised_) {
    if (auto shutdown = reinterpret_cast<int (*)()>(symbol("nvmlShutdown"))) shutdown();
  }
  if (library_ != nullptr) dlclose(library_);
}

void* Nvml::symbol(const char* name) const {
  return library_ == nullptr ? nullptr : dlsym(library_, name);
}

std::string Nvml::error(int status) const {
  auto text = reinterpret_cast<const char* (*)(int)>(symbol("nvmlErrorString"));
  return text ? text(status) : "NVML error " + std::to_string(status);
}

void* Nvml::device_by_pci_bus_id(const std::string& pci_bus_id, std::string& why) const {
  if (!ok()) {
    why = why_;
    return nullptr;
  }
  auto by_pci = reinterpret_cast<int (*)(const char*, void**)>(symbol("nvmlDeviceGetHandleByPciBusId_v2"));
  void* device = nullptr;
  const int status = by_pci ? by_pci(pci_bus_id.c_str(), &device) : kNotSupported;
  if (status == 0) return device;
  why = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + ") failed: " + error(status);
  return nullptr;
}

void* Nvml::device_by_uuid(const std::string& uuid, std::string& why) const {
  if (!ok()) {
    why = why_;
    return nullptr;
  }
  auto by_uuid = reinterpret_cast<int (*)(const char*, void**)>(symbol("nvmlDeviceGetHandleByUUID"));
  void* device = nullptr;
  const int status = by_uuid ? by_uuid(uuid.c_str(), &device) : kNotSupported;
  if (status == 0) return device;
  why = "NVML has no GPU " + uuid + " (" + error(status) + ")";
  return nullptr;
}

std::optional<unsigned> Nvml::device_count() const {
  auto count = reinterpret_cast<int (*)(unsigned*)>(symbol("nvmlDeviceGetCount_v2"));
  unsigned devices = 0;
  if (ok() && count && count(&devices) == 0) return devices;
  return std::nullopt;
}

void* Nvml::device_by_index(unsigned index) const {
  auto by_index = reinterpret_cast<int (*)(unsigned, void**)>(symbol("nvmlDeviceGetHandleByIndex_v2"));
  void* device = nullptr;
  return ok() && by_index && by_index(index, &device) == 0 ? device : nullptr;
}

std::string Nvml::device_name(void* device) const {
  char text[96] = {};
  return call(device, "nvmlDeviceGetName", text, static_cast<unsigned>(sizeof(text))) == 0 ? text : "";
}

std::string Nvml::device_uuid(void* device) const {
  char text[96] = {};
  return call(device, "nvmlDeviceGetUUID", text, static_cast<unsigned>(sizeof(text))) == 0 ? text : "";
}

std::string Nvml::driver_version() const {
  auto version = reinterpret_cast<int (*)(char*, unsigned)>(symbol("nvmlSystemGetDriverVersion"));
  char text[96] = {};
  return ok() && version && version(text, sizeof(text)) == 0 ? text : "";
}

}  // namespace kw::common
