// One module compiled in variants (-D) for module_digest_test: which
// kernels' digests each change moves.
__device__ __noinline__ float helper(float x) {
  return x * x + 1.0f;
}

#ifdef SCALE_CHANGED
__constant__ float scale[4] = {1, 2, 3, 5};
#else
__constant__ float scale[4] = {1, 2, 3, 4};
#endif

__global__ void k1(float* p) {
  p[threadIdx.x] = helper(p[threadIdx.x]) * scale[0];
}

__global__ void k2(float* p, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#ifdef K2_CHANGED
    p[i] += 3.0f;
#else
    p[i] += 2.0f;
#endif
  }
}

#ifdef EXTRA_KERNEL
__global__ void k0(float* p) {
  p[0] = 7.0f;
}
#endif

template <int T>
__global__ void kt(float* p) {
  __shared__ float s[T];
  s[threadIdx.x] = p[threadIdx.x];
  __syncthreads();
  p[threadIdx.x] = s[T - 1 - threadIdx.x];
}
template __global__ void kt<128>(float*);
template __global__ void kt<256>(float*);
