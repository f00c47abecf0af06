// Small kernels for the harness self-tests: y = a * x, correct and broken
// variants, each a row of DESIGN.md's failure table.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace kwbench_selftest {

__global__ void scale_kernel(const float* x, float* y, float a, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i];
  }
}

// Writes only the elements its grid covers once: no grid-stride loop.
__global__ void scale_unwritten_kernel(const float* x, float* y, float a, std::size_t n) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n / 2) y[i] = a * x[i];
}

// sqrt of a negative number for inputs in [0, 1).
__global__ void scale_nan_kernel(const float* x, float* y, float a, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * sqrtf(x[i] - 2.0f);
  }
}

// Writes far outside its buffer: an illegal address fault.
__global__ void scale_fault_kernel(const float* x, float* y, float a, std::size_t n) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i + (std::size_t{1} << 40)] = a * x[i];
}

// Asks for 160 KB of dynamic shared memory; launchable only after raising
// its limit with cudaFuncSetAttribute (which its registration does not do).
__global__ void big_smem_kernel(float* y) {
  extern __shared__ float tile[];
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  y[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

}  // namespace kwbench_selftest
