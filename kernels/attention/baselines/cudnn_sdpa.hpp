// cuDNN's fused scaled-dot-product attention, built through the backend
// (graph) API as the operation graph cuDNN's SDPA engines match: matmul,
// scale, optional causal mask, softmax (max, sub, exp, sum, log-sum-exp, div),
// matmul. Contiguous [B, H, S, D] tensors.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kw_attention/attention.hpp"

namespace kw::attention {

class CudnnSdpa {
 public:
  // Builds the plan for these params (pointers included); never throws:
  // unavailable() says why it cannot run here, or is empty.
  explicit CudnnSdpa(const ForwardParams& params, cudaStream_t stream);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  const std::string& unavailable() const { return unavailable_; }
  std::size_t workspace_bytes() const;
  // Runs on the stream given at construction; `workspace` has workspace_bytes().
  void run(void* workspace);

 private:
  struct Plan;
  std::unique_ptr<Plan> plan_;
  std::string unavailable_;
};

}  // namespace kw::attention
