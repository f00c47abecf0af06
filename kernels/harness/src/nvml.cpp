#include "nvml.hpp"

namespace kwbench {

namespace {

constexpr int kClockSm = 1, kClockMem = 2, kTemperatureGpu = 0;

}  // namespace

Nvml::Nvml(const std::string& pci_bus_id) {
  device_ = nvml_.device_by_pci_bus_id(pci_bus_id, why_);
}

Nvml::~Nvml() = default;

std::optional<GpuReading> Nvml::read() {
  if (!available()) return std::nullopt;
  GpuReading reading;
  unsigned int value = 0;
  unsigned long long mask = 0;
  if (nvml_.call(device_, "nvmlDeviceGetClockInfo", kClockSm, &value) == 0) reading.sm_mhz = value;
  if (nvml_.call(device_, "nvmlDeviceGetClockInfo", kClockMem, &value) == 0) reading.mem_mhz = value;
  // Renamed in newer drivers; the old name still resolves on older ones.
  if (nvml_.call(device_, "nvmlDeviceGetCurrentClocksEventReasons", &mask) == 0 ||
      nvml_.call(device_, "nvmlDeviceGetCurrentClocksThrottleReasons", &mask) == 0)
    reading.clocks_event_reasons = mask;
  if (nvml_.call(device_, "nvmlDeviceGetTemperature", kTemperatureGpu, &value) == 0) reading.temp_c = value;
  if (nvml_.call(device_, "nvmlDeviceGetPowerUsage", &value) == 0) reading.power_w = value / 1000.0;
  return reading;
}

std::optional<std::uint64_t> Nvml::energy_mj() {
  if (!available()) {
    energy_why_ = why_;
    return std::nullopt;
  }
  unsigned long long millijoules = 0;
  const int status = nvml_.call(device_, "nvmlDeviceGetTotalEnergyConsumption", &millijoules);
  if (status == kw::common::Nvml::kNotSupported &&
      nvml_.symbol("nvmlDeviceGetTotalEnergyConsumption") == nullptr) {
    energy_why_ = "nvmlDeviceGetTotalEnergyConsumption not found";
    return std::nullopt;
  }
  if (status != 0) {
    energy_why_ = "nvmlDeviceGetTotalEnergyConsumption failed: " + nvml_.error(status);
    return std::nullopt;
  }
  return millijoules;
}

}  // namespace kwbench
