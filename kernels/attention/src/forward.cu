// Validation and the runtime -> template dispatch.
#include <cstdio>
#include <cstring>
#include <sstream>

#include "launch.cuh"

namespace kw::attention {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
  }
  return "unknown";
}

TensorRef bhsd(const void* data, int heads, int seqlen, int head_dim) {
  const auto row = static_cast<std::int64_t>(head_dim);
  return {data, heads * seqlen * row, seqlen * row, row};
}

namespace {

void require(bool condition, const std::string& message) {
  if (!condition) throw UnsupportedError("attention forward: " + message);
}

void check_tensor(const char* name, const void* data, const TensorRef& strides, int head_dim) {
  require(data != nullptr, std::string(name) + " is a null pointer");
  require(reinterpret_cast<std::uintptr_t>(data) % 16 == 0,
          std::string(name) + " must be 16-byte aligned (rows are copied 16 bytes at a time)");
  const std::int64_t values[] = {strides.batch_stride, strides.head_stride, strides.row_stride};
  const char* labels[] = {"batch_stride", "head_stride", "row_stride"};
  for (int i = 0; i < 3; ++i) {
    require(values[i] >= 0 && values[i] % 8 == 0, std::string(name) + "." + labels[i] + " = " +
                                                      std::to_string(values[i]) +
                                                      " must be a non-negative multiple of 8 elements");
  }
  require(strides.row_stride >= head_dim, std::string(name) +
                                              ".row_stride = " + std::to_string(strides.row_stride) +
                                              " is less than head_dim " + std::to_string(head_dim));
}

// The kernel addresses rows within one (batch, head) matrix with 32-bit offsets.
void check_rows_fit(const char* name, const TensorRef& strides, int rows) {
  const std::int64_t last = (static_cast<std::int64_t>(rows) - 1) * strides.row_stride;
  require(last < (std::int64_t{1} << 31) - 256,
          std::string(name) + ": " + std::to_string(rows) + " rows of row_stride " +
              std::to_string(strides.row_stride) + " exceed 2^31 elements within one head");
}

template <typename Fn>
void dispatch(const ForwardParams& params, Fn&& fn) {
  switch (params.dtype) {
    case DType::fp16:
      if (params.head_dim == 64) return fn.template operator()<64, __half>();
      return fn.template operator()<128, __half>();
    case DType::bf16:
      if (params.head_dim == 64) return fn.template operator()<64, __nv_bfloat16>();
      return fn.template operator()<128, __nv_bfloat16>();
  }
}

}  // namespace

void validate_shape(const ForwardParams& p) {
  require(p.dtype == DType::fp16 || p.dtype == DType::bf16,
          "dtype " + std::to_string(static_cast<int>(p.dtype)) + " is not supported (fp16, bf16)");
  require(p.head_dim == 64 || p.head_dim == 128,
          "head_dim " + std::to_string(p.head_dim) + " is not supported (64, 128)");
  require(p.batch >= 1 && p.batch <= 65535, "batch " + std::to_string(p.batch) + " is outside 1..65535");
  require(p.heads >= 1 && p.heads <= 65535, "heads " + std::to_string(p.heads) + " is outside 1..65535");
  require(p.seqlen_q >= 1, "seqlen_q " + std::to_string(p.seqlen_q) + " must be at least 1");
  require(p.seqlen_k >= 1, "seqlen_k " + std::to_string(p.seqlen_k) + " must be at least 1");
}

void validate(const ForwardParams& p) {
  validate_shape(p);
  require(p.spin_cycles >= 0, "spin_cycles " + std::to_string(p.spin_cycles) + " must be >= 0");
  require(std::isfinite(p.softmax_scale) && p.softmax_scale > 0,
          "softmax_scale " + std::to_string(p.softmax_scale) + " must be finite and positive");
  check_tensor("q", p.q.data, p.q, p.head_dim);
  check_tensor("k", p.k.data, p.k, p.head_dim);
  check_tensor("v", p.v.data, p.v, p.head_dim);
  check_tensor("o", p.o, p.o_strides, p.head_dim);
  check_rows_fit("q", p.q, p.seqlen_q);
  check_rows_fit("k", p.k, p.seqlen_k);
  check_rows_fit("v", p.v, p.seqlen_k);
  check_rows_fit("o", p.o_strides, p.seqlen_q);
  require(p.lse == nullptr || reinterpret_cast<std::uintptr_t>(p.lse) % 4 == 0, "lse must be 4-byte aligned");
}

void forward(const ForwardParams& params, cudaStream_t stream) {
  validate(params);
  dispatch(params, [&]<int kHeadDim, typename T>() { launch_forward<kHeadDim, T>(params, stream); });
}

LaunchShape launch_shape(const ForwardParams& params) {
  validate_shape(params);
  LaunchShape shape;
  dispatch(params, [&]<int kHeadDim, typename T>() { shape = forward_launch_shape<kHeadDim, T>(params); });
  return shape;
}

std::vector<KernelEntry> kernels() {
  std::vector<KernelEntry> out;
  append_kernels<64, __half>(out);
  append_kernels<128, __half>(out);
  append_kernels<64, __nv_bfloat16>(out);
  append_kernels<128, __nv_bfloat16>(out);
  return out;
}

}  // namespace kw::attention

extern "C" int kw_attention_forward(const kw::attention::ForwardParams* params, cudaStream_t stream,
                                    char* error, std::size_t error_size) {
  try {
    if (params == nullptr)
      throw kw::attention::UnsupportedError("attention forward: params is a null pointer");
    kw::attention::forward(*params, stream);
    return 0;
  } catch (const std::exception& failure) {
    if (error != nullptr && error_size > 0) {
      std::strncpy(error, failure.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return -1;
  }
}

extern "C" int kw_attention_forward_bhsd(int dtype, int batch, int heads, int seqlen_q, int seqlen_k,
                                         int head_dim, const void* q, const void* k, const void* v, void* o,
                                         float* lse, float softmax_scale, int causal, cudaStream_t stream,
                                         char* error, std::size_t error_size) {
  kw::attention::ForwardParams params;
  params.dtype = dtype == 1 ? kw::attention::DType::bf16 : kw::attention::DType::fp16;
  params.batch = batch;
  params.heads = heads;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.head_dim = head_dim;
  params.q = kw::attention::bhsd(q, heads, seqlen_q, head_dim);
  params.k = kw::attention::bhsd(k, heads, seqlen_k, head_dim);
  params.v = kw::attention::bhsd(v, heads, seqlen_k, head_dim);
  params.o = o;
  params.o_strides = kw::attention::bhsd(o, heads, seqlen_q, head_dim);
  params.lse = lse;
  params.softmax_scale = softmax_scale;
  params.causal = causal != 0;
  if (dtype != 0 && dtype != 1) {
    if (error != nullptr && error_size > 0)
      std::snprintf(error, error_size, "attention forward: dtype %d is neither 0 (fp16) nor 1 (bf16)", dtype);
    return -1;
  }
  return kw_attention_forward(&params, stream, error, error_size);
}
