// Forward attention, FlashAttention-2 style: O = softmax(scale * Q K^T) V per
// (batch, head), computed tile by tile with an online softmax so the S x S
// score matrix never leaves the chip; also writes the log-sum-exp per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace kw::attention {

enum class DType { fp16, bf16 };

const char* dtype_name(DType dtype);

// Tensors are addressed by strides in elements, so [B, H, S, D] and
// [B, S, H, D] layouts work alike; the last (head-dim) stride must be 1.
struct TensorRef {
  const void* data = nullptr;
  std::int64_t batch_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;
};

struct ForwardParams {
  DType dtype = DType::fp16;
  int batch = 0;
  int heads = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  TensorRef q, k, v;
  void* o = nullptr;  // same strides as o_strides
  TensorRef o_strides;
  float* lse = nullptr;  // [batch, heads, seqlen_q] fp32, natural log; may be null
  float softmax_scale = 0;
  // Key j is visible to query i only when j <= i (top-left aligned, as
  // PyTorch's is_causal).
  bool causal = false;
  // Fault injection for the regression detector's power tests: the kernel
  // takes spin_cycles SM cycles longer. With `spin_counter` (one zeroed
  // unsigned int, used by one stream) the last block of the grid to finish
  // spins, whatever the grid; without, every block spins as it starts, exact
  // for a grid that fits in one wave and free of the counter's atomics,
  // which cost a tiny kernel more than the spin. Always 0 outside those tests.
  long long spin_cycles = 0;
  unsigned int* spin_counter = nullptr;
};

// Contiguous [B, H, S, D] strides.
TensorRef bhsd(const void* data, int heads, int seqlen, int head_dim);

// Thrown for shapes, dtypes or pointers the kernels do not support; the
// message names the field and the supported values.
class UnsupportedError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Shape checks only (dtype, head_dim, batch, heads, sequence lengths).
void validate_shape(const ForwardParams& params);
// Everything: the shape, pointers, alignment, strides and the scale.
void validate(const ForwardParams& params);

// Validates, then launches on `stream`. Throws UnsupportedError, or
// std::runtime_error with the CUDA error of a failed launch.
void forward(const ForwardParams& params, cudaStream_t stream);

// The launch a call with this shape makes (pointers are not needed).
struct LaunchShape {
  std::string kernel_pattern;  // glob over the demangled name of the instantiation
  dim3 grid;
  dim3 block;
  std::size_t dynamic_smem = 0;
};
LaunchShape launch_shape(const ForwardParams& params);

// Every instantiated kernel: its function, block size and dynamic shared
// memory, and a hook that raises its shared memory limit as forward() does.
struct KernelEntry {
  std::string name;
  const void* function = nullptr;
  int block_threads = 0;
  std::size_t dynamic_smem = 0;
  void (*configure)() = nullptr;
};
std::vector<KernelEntry> kernels();

}  // namespace kw::attention

// C entry point the load stage resolves with dlsym: proves the library's
// instantiations link. Returns 0, or -1 after writing the error to `error`.
extern "C" int kw_attention_forward(const kw::attention::ForwardParams* params, cudaStream_t stream,
                                    char* error, std::size_t error_size);

// The same for contiguous [B, H, S, D] tensors, with plain arguments, for
// callers without C++ (Python's ctypes): dtype 0 is fp16, 1 bf16; `lse` may
// be null; `causal` 0 or 1.
extern "C" int kw_attention_forward_bhsd(int dtype, int batch, int heads, int seqlen_q, int seqlen_k,
                                         int head_dim, const void* q, const void* k, const void* v, void* o,
                                         float* lse, float softmax_scale, int causal, cudaStream_t stream,
                                         char* error, std::size_t error_size);
