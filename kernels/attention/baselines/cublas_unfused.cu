#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>

#include "cublas_unfused.hpp"

namespace kw::attention {

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: " + cublasGetStatusName(status) + " (" +
                             cublasGetStatusString(status) + ")");
  }
}

constexpr int kSoftmaxThreads = 256;

template <typename T>
__device__ float load_float(const T* p);
template <>
__device__ float load_float(const __half* p) {
  return __half2float(*p);
}
template <>
__device__ float load_float(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}

// One block per row: pass 1 keeps a running (max, sum) per thread, merged
// across the block; pass 2 writes P = exp(s - max) / sum in place.
template <typename T>
__global__ void softmax_rows_kernel(T* scores, float* lse, int seqlen_q, int seqlen_k, bool causal) {
  __shared__ float shared_max[kSoftmaxThreads / 32], shared_sum[kSoftmaxThreads / 32];
  const std::int64_t row = blockIdx.x;
  const int i = static_cast<int>(row % seqlen_q);
  T* s = scores + row * seqlen_k;
  const int keys = causal ? min(seqlen_k, i + 1) : seqlen_k;
  float m = -INFINITY, l = 0.f;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float x = load_float(s + j);
    if (x > m) {
      l = l * __expf(m - x) + 1.f;
      m = x;
    } else {
      l += __expf(x - m);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float l2 = __shfl_xor_sync(0xffffffffu, l, offset);
    const float mm = fmaxf(m, m2);
    l = (m == -INFINITY ? 0.f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.f : l2 * __expf(m2 - mm));
    m = mm;
  }
  if (threadIdx.x % 32 == 0) {
    shared_max[threadIdx.x / 32] = m;
    shared_sum[threadIdx.x / 32] = l;
  }
  __syncthreads();
  m = shared_max[0];
  l = shared_sum[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) {
    const float m2 = shared_max[w], l2 = shared_sum[w];
    const float mm = fmaxf(m, m2);
    l = (m == -INFINITY ? 0.f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.f : l2 * __expf(m2 - mm));
    m = mm;
  }
  const float inverse = 1.f / l;
  for (int j = threadIdx.x; j < seqlen_k; j += blockDim.x) {
    s[j] = static_cast<T>(j < keys ? __expf(load_float(s + j) - m) * inverse : 0.f);
  }
  if (threadIdx.x == 0 && lse != nullptr) lse[row] = m + logf(l);
}

}  // namespace

CublasUnfused::CublasUnfused() {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
}

CublasUnfused::~CublasUnfused() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

std::size_t CublasUnfused::workspace_bytes(const ForwardParams& p) {
  return static_cast<std::size_t>(p.batch) * p.heads * p.seqlen_q * p.seqlen_k * 2;
}

void CublasUnfused::run(const ForwardParams& p, void* scores, cudaStream_t stream) {
  check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
  const cudaDataType_t type = p.dtype == DType::fp16 ? CUDA_R_16F : CUDA_R_16BF;
  const int batches = p.batch * p.heads;
  const long long sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;
  const float scale = p.softmax_scale, one = 1.f, zero = 0.f;
  // Row-major S[Sq, Sk] = Q K^T is column-major S^T = K Q^T.
  check_cublas(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, p.seqlen_k, p.seqlen_q,
                                          p.head_dim, &scale, p.k.data, type, p.head_dim, sk * d, p.q.data,
                                          type, p.head_dim, sq * d, &zero, scores, type, p.seqlen_k, sq * sk,
                                          batches, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx(Q K^T)");
  const unsigned rows = static_cast<unsigned>(batches) * p.seqlen_q;
  if (p.dtype == DType::fp16) {
    softmax_rows_kernel<<<rows, kSoftmaxThreads, 0, stream>>>(static_cast<__half*>(scores), p.lse, p.seqlen_q,
                                                              p.seqlen_k, p.causal);
  } else {
    softmax_rows_kernel<<<rows, kSoftmaxThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(scores), p.lse,
                                                              p.seqlen_q, p.seqlen_k, p.causal);
  }
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("softmax launch failed: ") + cudaGetErrorString(status));
  // Row-major O[Sq, D] = P V is column-major O^T = V^T P^T.
  check_cublas(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, p.head_dim, p.seqlen_q,
                                          p.seqlen_k, &one, p.v.data, type, p.head_dim, sk * d, scores, type,
                                          p.seqlen_k, sq * sk, &zero, p.o, type, p.head_dim, sq * d, batches,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx(P V)");
}

}  // namespace kw::attention
