#include "clock_probe.hpp"

#include "kwbench/kwbench.hpp"

namespace kwbench {

namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread spins ~200k cycles (~0.1 ms at 2 GHz): long enough that the
// timer's granularity is well under 1% of the interval.
__global__ void clock_probe_kernel(unsigned long long* out) {
  unsigned long long t0 = global_ns();
  long long c0 = clock64();
  long long c1 = c0;
  while (c1 - c0 < 200000) c1 = clock64();
  unsigned long long t1 = global_ns();
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}

}  // namespace

ClockProbe::ClockProbe() {
  KW_CUDA_CHECK(cudaMalloc(&result_, 2 * sizeof(unsigned long long)));
  if (cudaError_t error = cudaMallocHost(&host_, 2 * sizeof(unsigned long long)); error != cudaSuccess) {
    cudaFree(result_);
    KW_CUDA_CHECK(error);
  }
  host_[0] = host_[1] = 0;
}

ClockProbe::~ClockProbe() {
  cudaFree(result_);
  cudaFreeHost(host_);
}

void ClockProbe::enqueue(cudaStream_t stream) {
  clock_probe_kernel<<<1, 1, 0, stream>>>(result_);
  KW_CUDA_CHECK_LAUNCH();
  KW_CUDA_CHECK(
      cudaMemcpyAsync(host_, result_, 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
}

double ClockProbe::mhz() const {
  return host_[1] == 0 ? 0 : static_cast<double>(host_[0]) * 1000.0 / static_cast<double>(host_[1]);
}

}  // namespace kwbench
