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
  // SM clock in MHz: `enqueue` queues the probe behind the stream's work;
  // `mhz` reads it once the stream has been synchronized.
  void enqueue(cudaStream_t stream);
  double mhz() const;

 private:
  unsigned long long* result_ = nullptr;
  unsigned long long* host_ = nullptr;  // pinned: the copy back does not block the host
};

}  // namespace kwbench
