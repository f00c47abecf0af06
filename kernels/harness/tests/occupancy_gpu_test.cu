// The theoretical occupancy a regression explanation shows
// (kw::common::theoretical_occupancy, from the compute-capability table)
// against the CUDA runtime's own occupancy calculation, over kernels of
// different register pressure, block sizes and shared memory. Skipped where
// there is no CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kw/common/occupancy.hpp"

namespace {

#define CUDA_OK(call)                                                                \
  do {                                                                               \
    cudaError_t status_ = (call);                                                    \
    ASSERT_EQ(status_, cudaSuccess) << #call << ": " << cudaGetErrorString(status_); \
  } while (0)

// kValues live values per thread: the compiler's register count grows with it.
template <int kValues>
__global__ void pressure_kernel(float* out, int n) {
  extern __shared__ float tile[];
  float acc[kValues];
#pragma unroll
  for (int i = 0; i < kValues; ++i) acc[i] = out[(threadIdx.x * kValues + i) % n];
  for (int step = 0; step < 8; ++step) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) acc[i] = acc[i] * acc[(i + step + 1) % kValues] + 1.0f;
  }
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kValues; ++i) sum += acc[i];
  tile[threadIdx.x] = sum;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
}

struct Kernel {
  const void* function;
  const char* name;
};

class OccupancyGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(OccupancyGpuTest, TheTableAgreesWithTheCudaRuntime) {
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const std::string cc = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  auto sm = kw::common::sm_limits(cc);
  ASSERT_TRUE(sm) << "compute capability " << cc << " is not in the table";
  EXPECT_EQ(sm->max_warps * 32, prop.maxThreadsPerMultiProcessor);
  EXPECT_EQ(sm->max_blocks, prop.maxBlocksPerMultiProcessor);
  EXPECT_EQ(sm->registers, prop.regsPerMultiprocessor);
  EXPECT_EQ(sm->shared_bytes, static_cast<std::int64_t>(prop.sharedMemPerMultiprocessor));
  EXPECT_EQ(sm->shared_bytes_per_block, static_cast<std::int64_t>(prop.sharedMemPerBlockOptin));
  EXPECT_EQ(sm->reserved_shared_bytes, static_cast<std::int64_t>(prop.reservedSharedMemPerBlock));

  const std::vector<Kernel> kernels = {{reinterpret_cast<const void*>(pressure_kernel<4>), "4 values"},
                                       {reinterpret_cast<const void*>(pressure_kernel<40>), "40 values"},
                                       {reinterpret_cast<const void*>(pressure_kernel<120>), "120 values"}};
  int compared = 0;
  for (const Kernel& kernel : kernels) {
    cudaFuncAttributes attributes{};
    CUDA_OK(cudaFuncGetAttributes(&attributes, kernel.function));
    CUDA_OK(cudaFuncSetAttribute(kernel.function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(prop.sharedMemPerBlockOptin - attributes.sharedSizeBytes)));
    for (int threads : {32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024}) {
      if (threads > attributes.maxThreadsPerBlock) continue;
      for (std::size_t dynamic : {0, 4096, 40000, 49152, 65536, 102400, 150000, 200000, 232448}) {
        if (attributes.sharedSizeBytes + dynamic > prop.sharedMemPerBlockOptin) continue;
        int blocks = -1;
        CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel.function, threads, dynamic));
        kw::common::Occupancy ours = kw::common::theoretical_occupancy(
            *sm, threads, attributes.numRegs,
            static_cast<std::int64_t>(attributes.sharedSizeBytes + dynamic));
        EXPECT_EQ(ours.blocks_per_sm, blocks)
            << kernel.name << " (" << attributes.numRegs << " registers), " << threads << " threads, "
            << dynamic << " bytes dynamic shared memory: ours limited by " << ours.limited_by;
        ++compared;
      }
    }
    std::printf("%s: %d registers, %zu bytes static shared memory\n", kernel.name, attributes.numRegs,
                attributes.sharedSizeBytes);
  }
  std::printf("compared %d launch configurations on %s (CC %s)\n", compared, prop.name, cc.c_str());
  EXPECT_GT(compared, 200);
}

}  // namespace
