// NVML through dlopen("libnvidia-ml.so.1"): no header or link dependency, a
// reason where the driver library or a GPU is missing, and one loader for
// the harness (clocks, throttling, energy per sample) and the agent (the
// host's GPUs, their health).
#pragma once

#include <optional>
#include <string>

namespace kw::common {

class Nvml {
 public:
  // NVML_ERROR_NOT_SUPPORTED: what a call the driver lacks returns.
  static constexpr int kNotSupported = 3;

  // Opens the library and initialises NVML; ok() says whether it did and
  // why() why not.
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ok() const { return initialised_; }
  const std::string& why() const { return why_; }

  // A device handle, or nullptr with `why` saying why.
  void* device_by_pci_bus_id(const std::string& pci_bus_id, std::string& why) const;
  void* device_by_uuid(const std::string& uuid, std::string& why) const;
  // How many GPUs NVML sees (nullopt where it cannot count them), and each by index.
  std::optional<unsigned> device_count() const;
  void* device_by_index(unsigned index) const;
  // nvmlDeviceGetName / nvmlDeviceGetUUID; empty where NVML cannot say.
  std::string device_name(void* device) const;
  std::string device_uuid(void* device) const;
  std::string driver_version() const;
  std::string error(int status) const;

  // A device query by its entry point's name: its NVML status, or
  // kNotSupported where the driver has no such call. Looked up on every
  // call, never cached: a process may open and close NVML many times, and
  // the library may come back at another address.
  template <typename... Args>
  int call(void* device, const char* name, Args... args) const {
    auto fn = reinterpret_cast<int (*)(void*, Args...)>(symbol(name));
    return fn == nullptr || device == nullptr ? kNotSupported : fn(device, args...);
  }
  void* symbol(const char* name) const;

 private:
  void* library_ = nullptr;
  bool initialised_ = false;
  std::string why_;
};

}  // namespace kw::common
