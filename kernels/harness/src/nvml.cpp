#include "nvml.hpp"

#include <dlfcn.h>

namespace kwbench {

namespace {

// The few NVML entry points used, with their documented C signatures.
using nvmlReturn = int;
using InitFn = nvmlReturn (*)();
using ShutdownFn = nvmlReturn (*)();
using HandleByPciFn = nvmlReturn (*)(const char*, void**);
using ClockFn = nvmlReturn (*)(void*, int, unsigned int*);
using ReasonsFn = nvmlReturn (*)(void*, unsigned long long*);
using TemperatureFn = nvmlReturn (*)(void*, int, unsigned int*);
using PowerFn = nvmlReturn (*)(void*, unsigned int*);
using EnergyFn = nvmlReturn (*)(void*, unsigned long long*);
using DriverVersionFn = nvmlReturn (*)(char*, unsigned int);
using ErrorStringFn = const char* (*)(nvmlReturn);

constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

Nvml::Nvml(const std::string& pci_bus_id) {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    why_ = std::string("NVML unavailable: ") + dlerror();
    return;
  }
  auto init = symbol<InitFn>(library_, "nvmlInit_v2");
  auto by_pci = symbol<HandleByPciFn>(library_, "nvmlDeviceGetHandleByPciBusId_v2");
  auto error_string = symbol<ErrorStringFn>(library_, "nvmlErrorString");
  if (init == nullptr || by_pci == nullptr) {
    why_ = "NVML unavailable: nvmlInit_v2 / nvmlDeviceGetHandleByPciBusId_v2 not found";
    return;
  }
  if (nvmlReturn status = init(); status != 0) {
    why_ =
        std::string("nvmlInit_v2 failed: ") + (error_string ? error_string(status) : std::to_string(status));
    return;
  }
  void* device = nullptr;
  if (nvmlReturn status = by_pci(pci_bus_id.c_str(), &device); status != 0) {
    why_ = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id +
           ") failed: " + (error_string ? error_string(status) : std::to_string(status));
    return;
  }
  device_ = device;
}

Nvml::~Nvml() {
  if (library_ == nullptr) return;
  if (device_ != nullptr) {
    if (auto shutdown = symbol<ShutdownFn>(library_, "nvmlShutdown")) shutdown();
  }
  dlclose(library_);
}

std::optional<GpuReading> Nvml::read() {
  if (!available()) return std::nullopt;
  // Resolved per instance, never cached across instances: a bench process
  // opens and closes NVML once per case, and the library may come back at
  // another address (cached pointers crashed the second case of a process).
  auto clock = symbol<ClockFn>(library_, "nvmlDeviceGetClockInfo");
  // Renamed in newer drivers; the old name still resolves on older ones.
  auto reasons = symbol<ReasonsFn>(library_, "nvmlDeviceGetCurrentClocksEventReasons");
  if (reasons == nullptr) reasons = symbol<ReasonsFn>(library_, "nvmlDeviceGetCurrentClocksThrottleReasons");
  auto temperature = symbol<TemperatureFn>(library_, "nvmlDeviceGetTemperature");
  auto power = symbol<PowerFn>(library_, "nvmlDeviceGetPowerUsage");
  GpuReading reading;
  unsigned int value = 0;
  unsigned long long mask = 0;
  if (clock && clock(device_, kClockSm, &value) == 0) reading.sm_mhz = value;
  if (clock && clock(device_, kClockMem, &value) == 0) reading.mem_mhz = value;
  if (reasons && reasons(device_, &mask) == 0) reading.clocks_event_reasons = mask;
  if (temperature && temperature(device_, kTemperatureGpu, &value) == 0) reading.temp_c = value;
  if (power && power(device_, &value) == 0) reading.power_w = value / 1000.0;
  return reading;
}

std::optional<std::uint64_t> Nvml::energy_mj() {
  if (!available()) {
    energy_why_ = why_;
    return std::nullopt;
  }
  auto energy = symbol<EnergyFn>(library_, "nvmlDeviceGetTotalEnergyConsumption");
  if (energy == nullptr) {
    energy_why_ = "nvmlDeviceGetTotalEnergyConsumption not found";
    return std::nullopt;
  }
  unsigned long long millijoules = 0;
  if (nvmlReturn status = energy(device_, &millijoules); status != 0) {
    auto error_string = symbol<ErrorStringFn>(library_, "nvmlErrorString");
    energy_why_ = std::string("nvmlDeviceGetTotalEnergyConsumption failed: ") +
                  (error_string ? error_string(status) : std::to_string(status));
    return std::nullopt;
  }
  return millijoules;
}

std::string Nvml::driver_version() {
  if (library_ == nullptr) return {};
  auto version = symbol<DriverVersionFn>(library_, "nvmlSystemGetDriverVersion");
  char buffer[96] = {};
  if (version == nullptr || version(buffer, sizeof(buffer)) != 0) return {};
  return buffer;
}

}  // namespace kwbench
