#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "reference.hpp"

namespace kw::attention {

namespace {

constexpr int kReferenceThreads = 128;
constexpr int kMaxReferenceKeys = 48 * 1024;  // 192 KiB of fp32 scores

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

__device__ float to_float(__half x) {
  return __half2float(x);
}
__device__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  template <typename V>
  __device__ V operator()(V a, V b) const {
    return a + b;
  }
};

// A block-wide reduction: warp shuffles, then one value per warp through
// `scratch` (blockDim.x / 32 of them); every thread gets the result.
template <typename V, typename Op>
__device__ V block_reduce(V value, Op op, V* scratch) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // an earlier reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) value = op(value, scratch[w]);
  return value;
}

template <typename T>
__global__ void reference_rows_kernel(const ForwardParams p, const std::int64_t* rows, float* out,
                                      float* lse) {
  extern __shared__ float scores[];
  __shared__ float q_row[128];
  __shared__ float scratch[32];
  const std::int64_t flat = rows[blockIdx.x];
  const int i = static_cast<int>(flat % p.seqlen_q);
  const std::int64_t bh = flat / p.seqlen_q;
  const int h = static_cast<int>(bh % p.heads);
  const int b = static_cast<int>(bh / p.heads);
  const T* q =
      static_cast<const T*>(p.q.data) + b * p.q.batch_stride + h * p.q.head_stride + i * p.q.row_stride;
  const T* k = static_cast<const T*>(p.k.data) + b * p.k.batch_stride + h * p.k.head_stride;
  const T* v = static_cast<const T*>(p.v.data) + b * p.v.batch_stride + h * p.v.head_stride;
  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) q_row[d] = to_float(q[d]);
  __syncthreads();

  const int keys = p.causal ? min(p.seqlen_k, i + 1) : p.seqlen_k;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int j = warp; j < keys; j += warps) {
    const T* key = k + j * p.k.row_stride;
    float dot = 0.f;
    for (int d = lane; d < p.head_dim; d += 32) dot += q_row[d] * to_float(key[d]);
    for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0) scores[j] = dot * p.softmax_scale;
  }
  __syncthreads();

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  const float row_max = block_reduce(local_max, MaxOp{}, scratch);
  float local_sum = 0.f;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float e = expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  const float sum = block_reduce(local_sum, SumOp{}, scratch);
  __syncthreads();

  for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < keys; ++j) acc += scores[j] * to_float(v[j * p.v.row_stride + d]);
    out[blockIdx.x * static_cast<std::int64_t>(p.head_dim) + d] = acc / sum;
  }
  if (threadIdx.x == 0) lse[blockIdx.x] = row_max + logf(sum);
}

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T* out, std::size_t count, float range, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float unit =
        static_cast<float>(splitmix64(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (1.0f / 16777216.0f);
    out[i] = static_cast<T>(range * (2.f * unit - 1.f));
  }
}

// Per block: the sums of OutputErrors, added into the totals by one thread.
struct ErrorTotals {
  double error_sq, norm_sq, lse_error_sq, lse_norm_sq;
  unsigned long long max_abs_bits;  // a non-negative double's bits order as the doubles do
  unsigned long long nonfinite;
};

constexpr int kCompareThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kCompareThreads)
    compare_rows_kernel(const T* out, const float* lse, std::int64_t all_rows, int head_dim,
                        const std::int64_t* rows, int row_count, const float* expected,
                        const float* expected_lse, ErrorTotals* totals) {
  __shared__ double sums[kCompareThreads / 32];
  __shared__ unsigned long long counts[kCompareThreads / 32];
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long nonfinite = 0;
  for (std::int64_t i = first; i < all_rows * head_dim; i += stride) nonfinite += !isfinite(to_float(out[i]));
  if (lse != nullptr)
    for (std::int64_t i = first; i < all_rows; i += stride) nonfinite += !isfinite(lse[i]);
  // As the host compared them: a non-finite value is counted above, not summed.
  double error_sq = 0, norm_sq = 0, max_abs = 0, lse_error_sq = 0, lse_norm_sq = 0;
  for (std::int64_t i = first; i < static_cast<std::int64_t>(row_count) * head_dim; i += stride) {
    const std::int64_t r = i / head_dim, d = i % head_dim;
    const double got = to_float(out[rows[r] * head_dim + d]);
    if (!isfinite(got)) continue;
    const double want = expected[i], diff = got - want;
    error_sq += diff * diff;
    norm_sq += want * want;
    max_abs = fmax(max_abs, fabs(diff));
  }
  if (lse != nullptr) {
    for (std::int64_t r = first; r < row_count; r += stride) {
      const double got = lse[rows[r]];
      if (!isfinite(got)) continue;
      const double want = expected_lse[r];
      lse_error_sq += (got - want) * (got - want);
      lse_norm_sq += want * want;
    }
  }
  const double block_error = block_reduce(error_sq, SumOp{}, sums),
               block_norm = block_reduce(norm_sq, SumOp{}, sums);
  const double block_lse_error = block_reduce(lse_error_sq, SumOp{}, sums),
               block_lse_norm = block_reduce(lse_norm_sq, SumOp{}, sums);
  const unsigned long long block_nonfinite = block_reduce(nonfinite, SumOp{}, counts);
  for (int offset = 16; offset > 0; offset /= 2)
    max_abs = fmax(max_abs, __shfl_xor_sync(0xffffffffu, max_abs, offset));
  if (threadIdx.x % 32 == 0)
    atomicMax(&totals->max_abs_bits, static_cast<unsigned long long>(__double_as_longlong(max_abs)));
  if (threadIdx.x == 0) {
    atomicAdd(&totals->error_sq, block_error);
    atomicAdd(&totals->norm_sq, block_norm);
    atomicAdd(&totals->lse_error_sq, block_lse_error);
    atomicAdd(&totals->lse_norm_sq, block_lse_norm);
    atomicAdd(&totals->nonfinite, block_nonfinite);
  }
}

}  // namespace

OutputErrors compare_rows(const ForwardParams& params, const std::int64_t* rows, int row_count,
                          const float* expected, const float* expected_lse, cudaStream_t stream) {
  const std::int64_t all_rows = static_cast<std::int64_t>(params.batch) * params.heads * params.seqlen_q;
  const std::int64_t work =
      std::max(all_rows * params.head_dim, static_cast<std::int64_t>(row_count) * params.head_dim);
  const int blocks =
      static_cast<int>(std::clamp<std::int64_t>((work + kCompareThreads - 1) / kCompareThreads, 1, 2048));
  ErrorTotals* totals = nullptr;
  check(cudaMalloc(&totals, sizeof(ErrorTotals)), "cudaMalloc(compare totals)");
  ErrorTotals host{};
  try {
    check(cudaMemsetAsync(totals, 0, sizeof(ErrorTotals), stream), "cudaMemsetAsync(compare totals)");
    auto run = [&](auto* out) {
      compare_rows_kernel<<<blocks, kCompareThreads, 0, stream>>>(
          out, params.lse, all_rows, params.head_dim, rows, row_count, expected, expected_lse, totals);
      check(cudaGetLastError(), "compare_rows launch");
    };
    if (params.dtype == DType::fp16) {
      run(static_cast<const __half*>(params.o));
    } else {
      run(static_cast<const __nv_bfloat16*>(params.o));
    }
    check(cudaMemcpyAsync(&host, totals, sizeof(ErrorTotals), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync(compare totals)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(compare)");
  } catch (...) {
    cudaFree(totals);
    throw;
  }
  check(cudaFree(totals), "cudaFree(compare totals)");
  OutputErrors errors;
  errors.error_sq = host.error_sq;
  errors.norm_sq = host.norm_sq;
  errors.lse_error_sq = host.lse_error_sq;
  errors.lse_norm_sq = host.lse_norm_sq;
  std::memcpy(&errors.max_abs, &host.max_abs_bits, sizeof(double));
  errors.nonfinite = host.nonfinite;
  return errors;
}

int reference_max_seqlen_k() {
  return kMaxReferenceKeys;
}

void reference_rows(const ForwardParams& params, const std::int64_t* rows, int row_count, float* out,
                    float* lse, cudaStream_t stream) {
  validate(params);
  if (params.seqlen_k > kMaxReferenceKeys) {
    throw UnsupportedError("reference: seqlen_k " + std::to_string(params.seqlen_k) + " exceeds " +
                           std::to_string(kMaxReferenceKeys));
  }
  if (row_count == 0) return;
  const std::size_t smem = static_cast<std::size_t>(params.seqlen_k) * sizeof(float);
  auto run = [&](auto kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "cudaFuncSetAttribute(reference)");
    kernel<<<row_count, kReferenceThreads, smem, stream>>>(params, rows, out, lse);
    check(cudaGetLastError(), "reference launch");
  };
  if (params.dtype == DType::fp16) {
    run(reference_rows_kernel<__half>);
  } else {
    run(reference_rows_kernel<__nv_bfloat16>);
  }
}

std::vector<double> reference_cpu(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int batch, int heads, int seqlen_q,
                                  int seqlen_k, int head_dim, double scale, bool causal,
                                  std::vector<double>& lse) {
  const std::size_t rows = static_cast<std::size_t>(batch) * heads * seqlen_q;
  std::vector<double> out(rows * head_dim, 0.0);
  lse.assign(rows, 0.0);
  std::vector<double> scores(seqlen_k);
  for (std::size_t bh = 0; bh < static_cast<std::size_t>(batch) * heads; ++bh) {
    const double* qh = q.data() + bh * seqlen_q * head_dim;
    const double* kh = k.data() + bh * seqlen_k * head_dim;
    const double* vh = v.data() + bh * seqlen_k * head_dim;
    for (int i = 0; i < seqlen_q; ++i) {
      const int keys = causal ? std::min(seqlen_k, i + 1) : seqlen_k;
      double row_max = -INFINITY;
      for (int j = 0; j < keys; ++j) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d) dot += qh[i * head_dim + d] * kh[j * head_dim + d];
        scores[j] = dot * scale;
        row_max = std::max(row_max, scores[j]);
      }
      double sum = 0;
      for (int j = 0; j < keys; ++j) sum += scores[j] = std::exp(scores[j] - row_max);
      double* o = out.data() + (bh * seqlen_q + i) * head_dim;
      for (int j = 0; j < keys; ++j) {
        for (int d = 0; d < head_dim; ++d) o[d] += scores[j] / sum * vh[j * head_dim + d];
      }
      lse[bh * seqlen_q + i] = row_max + std::log(sum);
    }
  }
  return out;
}

void fill_random(DType dtype, void* data, std::size_t count, float range, std::uint64_t seed,
                 cudaStream_t stream) {
  if (dtype == DType::fp16) {
    fill_random_kernel<<<1024, 256, 0, stream>>>(static_cast<__half*>(data), count, range, seed);
  } else {
    fill_random_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, range, seed);
  }
  check(cudaGetLastError(), "fill_random launch");
}

std::vector<double> to_host_double(DType dtype, const void* data, std::size_t count) {
  std::vector<std::uint16_t> raw(count);
  check(cudaMemcpy(raw.data(), data, count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy(device->host)");
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == DType::fp16) {
      __half_raw h;
      h.x = raw[i];
      out[i] = static_cast<double>(__half2float(__half(h)));
    } else {
      __nv_bfloat16_raw h;
      h.x = raw[i];
      out[i] = static_cast<double>(__bfloat162float(__nv_bfloat16(h)));
    }
  }
  return out;
}

}  // namespace kw::attention
