// What the harness reads of one GPU through NVML (kw/common/nvml.hpp): its
// clocks, throttle reasons, temperature, power and energy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kw/common/nvml.hpp"

namespace kwbench {

struct GpuReading {
  double sm_mhz = 0;
  double mem_mhz = 0;
  std::uint64_t clocks_event_reasons = 0;
  double temp_c = 0;
  double power_w = 0;
};

// NVML reasons that mark a sample throttled: hardware slowdown, software and
// hardware thermal slowdown, power brake. The software power cap (0x4) is
// recorded but marks nothing: an H100 under sustained load reports it on
// nearly every round (seen at 400-530 W), so it would mark everything; a cap
// that really pulls the clock down is caught by the in-band clock probe.
inline constexpr std::uint64_t kThrottleMask = 0x8 | 0x20 | 0x40 | 0x80;

class Nvml {
 public:
  // Opens NVML for the CUDA device with this PCI bus id; unavailable() says
  // why when it cannot.
  explicit Nvml(const std::string& pci_bus_id);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return device_ != nullptr; }
  const std::string& unavailable() const { return why_; }
  std::optional<GpuReading> read();
  // The board's total energy since the driver loaded, in millijoules (Volta
  // and newer); nullopt, with energy_unavailable() saying why, where NVML
  // cannot read it.
  std::optional<std::uint64_t> energy_mj();
  const std::string& energy_unavailable() const { return energy_why_; }
  std::string driver_version() const { return nvml_.driver_version(); }

 private:
  kw::common::Nvml nvml_;
  void* device_ = nullptr;
  std::string why_;
  std::string energy_why_;
};

}  // namespace kwbench
