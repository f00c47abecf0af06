// Unfused attention the way a framework's math path runs it: S = scale * Q K^T
// (cuBLAS batched GEMM, S stored in the input dtype), a row softmax kernel
// (causal mask, log-sum-exp), O = P V (cuBLAS batched GEMM). Contiguous
// [B, H, S, D] tensors only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kw_attention/attention.hpp"

namespace kw::attention {

class CublasUnfused {
 public:
  CublasUnfused();
  ~CublasUnfused();
  CublasUnfused(const CublasUnfused&) = delete;
  CublasUnfused& operator=(const CublasUnfused&) = delete;

  // Bytes of the S/P workspace a call with these params needs.
  static std::size_t workspace_bytes(const ForwardParams& params);

  // params.o / params.lse receive the result; `scores` holds workspace_bytes().
  void run(const ForwardParams& params, void* scores, cudaStream_t stream);

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace kw::attention
