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

// Right but for one write past the end of its output, which lands in the
// allocation's rounding and faults nothing: only a sanitizer sees it.
__global__ void scale_overrun_kernel(const float* x, float* y, float a, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i];
    if (i == n - 1) y[n] = 0.0f;
  }
}

// Writes far outside its buffer: an illegal address fault.
__global__ void scale_fault_kernel(const float* x, float* y, float a, std::size_t n) {
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i + (std::size_t{1} << 40)] = a * x[i];
}

enum class Variant { good, block128, unwritten, nan, slow, fault, overrun };

// The candidate of each variant as the self-test benches launch it (C++ and,
// through tests/python/scale_launch.cu, Python).
inline void launch_scale(Variant variant, const float* x, float* y, float a, std::size_t n,
                         cudaStream_t stream) {
  const int threads = variant == Variant::block128 ? 128 : 384;
  int blocks = variant == Variant::slow ? 4 : 132 * 8;
  if (variant == Variant::unwritten || variant == Variant::fault)
    blocks = static_cast<int>((n / 2 + threads - 1) / threads);
  switch (variant) {
    case Variant::unwritten:
      scale_unwritten_kernel<<<blocks, threads, 0, stream>>>(x, y, a, n);
      break;
    case Variant::nan:
      scale_nan_kernel<<<blocks, threads, 0, stream>>>(x, y, a, n);
      break;
    case Variant::fault:
      scale_fault_kernel<<<blocks, threads, 0, stream>>>(x, y, a, n);
      break;
    case Variant::overrun:
      scale_overrun_kernel<<<blocks, threads, 0, stream>>>(x, y, a, n);
      break;
    default:
      scale_kernel<<<blocks, threads, 0, stream>>>(x, y, a, n);
      break;
  }
}

// The correctness sums of y against a * x, taken on the device: the largest
// case has 2^28 values, which took the host two seconds.
struct ScaleErrors {
  double error_sq, norm_sq;
  unsigned long long max_abs_bits;  // a non-negative double's bits order as the doubles do
  unsigned long long nonfinite;
};

__global__ void scale_errors_kernel(const float* x, const float* y, float a, std::size_t n,
                                    ScaleErrors* out) {
  double error_sq = 0, norm_sq = 0, max_abs = 0;
  unsigned long long nonfinite = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(y[i])) {
      ++nonfinite;
      continue;
    }
    const double reference = static_cast<double>(a) * x[i], diff = y[i] - reference;
    error_sq += diff * diff;
    norm_sq += reference * reference;
    max_abs = fmax(max_abs, fabs(diff));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    error_sq += __shfl_xor_sync(0xffffffffu, error_sq, offset);
    norm_sq += __shfl_xor_sync(0xffffffffu, norm_sq, offset);
    max_abs = fmax(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, offset));
    nonfinite += __shfl_xor_sync(0xffffffffu, nonfinite, offset);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&out->error_sq, error_sq);
    atomicAdd(&out->norm_sq, norm_sq);
    atomicMax(&out->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
    atomicAdd(&out->nonfinite, nonfinite);
  }
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
