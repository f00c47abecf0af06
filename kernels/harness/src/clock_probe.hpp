// In-band SM clock: a kernel that spins a fixed number of cycles and reads
// the global nanosecond timer, so a sample's clock is known from the GPU
// itself, between samples, without trusting a host-side poll.
#pragma once

#include <cuda_runtime.h>

namespace kwbench {

class ClockProbe {
 public:
  ClockProbe();
  ~ClockProbe();
  ClockProbe(const ClockProbe&) = delete;
  ClockProbe& operator=(const ClockProbe&) = delete;
  // SM clock in MHz measured on `stream` (synchronizes it).
  double measure_mhz(cudaStream_t stream);

 private:
  unsigned long long* result_ = nullptr;
};

}  // namespace kwbench
