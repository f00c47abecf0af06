// The self-test kernels behind plain C entry points, so a Python bench
// (selftest_bench.py, through ctypes) launches the same correct and broken
// variants as the C++ self-test bench.
#include <cuda_runtime.h>

#include <cstddef>

#include "../scale_kernels.cuh"

// `variant`: kwbench_selftest::Variant's value (0 good, 1 block128,
// 2 unwritten, 3 nan, 4 slow, 5 fault, 6 overrun). Returns the launch's
// cudaError_t.
extern "C" int kw_selftest_scale(int variant, const float* x, float* y, float a, std::size_t n,
                                 cudaStream_t stream) {
  kwbench_selftest::launch_scale(static_cast<kwbench_selftest::Variant>(variant), x, y, a, n, stream);
  return static_cast<int>(cudaGetLastError());
}

// 160 KiB of dynamic shared memory without raising the kernel's limit: the
// driver refuses the launch.
extern "C" int kw_selftest_big_smem(float* y, cudaStream_t stream) {
  kwbench_selftest::big_smem_kernel<<<1, 256, 160 * 1024, stream>>>(y);
  return static_cast<int>(cudaGetLastError());
}
