// A process whose launch the driver refuses: 160 KiB of dynamic shared
// memory asked of a kernel whose limit was never raised from 48 KiB (the
// incident of DESIGN.md's table). Exits 1 with the runtime's own words,
// which name no shared memory; libkw_inject.so's record of it does.
#include <cstdio>

#include <cuda_runtime.h>

__global__ void tile_kernel(float* out) {
  extern __shared__ float tile[];
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

int main() {
  float* out = nullptr;
  if (cudaMalloc(&out, 256 * sizeof(float)) != cudaSuccess) return 2;
  tile_kernel<<<1, 256, 160 * 1024>>>(out);
  const cudaError_t status = cudaGetLastError();
  std::printf("launch: %s (%s)\n", cudaGetErrorName(status), cudaGetErrorString(status));
  cudaFree(out);
  return status == cudaSuccess ? 0 : 1;
}
