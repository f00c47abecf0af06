#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
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

__device__ float block_reduce(float value, bool is_max, float* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = is_max ? fmaxf(value, other) : value + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
    value = is_max ? fmaxf(value, scratch[w]) : value + scratch[w];
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
  const float row_max = block_reduce(local_max, true, scratch);
  float local_sum = 0.f;
  for (int j = threadIdx.x; j < keys; j += blockDim.x) {
    const float e = expf(scores[j] - row_max);
    scores[j] = e;
    local_sum += e;
  }
  const float sum = block_reduce(local_sum, false, scratch);
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

}  // namespace

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
