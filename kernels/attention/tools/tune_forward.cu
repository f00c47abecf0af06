// Times tile configurations of the forward kernel on one GPU (fp16, 16k
// tokens): the measurements behind ForwardConfig in src/launch.cuh. Built
// only with -DKW_ATTENTION_TUNING=ON. Each configuration's output is compared
// with the shipped kernel's (relative L2) before it is timed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../src/forward_kernel.cuh"
#include "../src/reference.hpp"

namespace {

using namespace kw::attention;

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    cudaError_t status_ = (call);                                                                     \
    if (status_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

template <typename Traits, bool kCausal>
void time_config(ForwardParams params, const std::vector<double>& shipped) {
  auto kernel = attention_forward_kernel<Traits, __half, kCausal>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
  const dim3 grid((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM, params.heads, params.batch);
  const std::size_t elems = shipped.size();
  CHECK(cudaMemset(params.o, 0xFF, elems * 2));
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes>>>(params);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const std::vector<double> got = to_host_double(DType::fp16, params.o, elems);
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < elems; ++i) {
    error += (got[i] - shipped[i]) * (got[i] - shipped[i]);
    norm += shipped[i] * shipped[i];
  }
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < 30; ++i) {
    CHECK(cudaEventRecord(start));
    kernel<<<grid, Traits::kThreads, Traits::kSmemBytes>>>(params);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  const double ms = times[times.size() / 2];
  const double flops = 4.0 * params.batch * params.heads * static_cast<double>(params.seqlen_q) *
                       params.seqlen_k * params.head_dim / (kCausal ? 2 : 1);
  std::printf("  BM=%3d BN=%3d warps=%d blocks/SM=%d %-6s %8.3f ms %6.1f TFLOP/s  rel diff vs shipped %.1e\n",
              Traits::kBlockM, Traits::kBlockN, Traits::kWarps, Traits::kMinBlocksPerSm,
              kCausal ? "causal" : "", ms, flops / ms / 1e9, std::sqrt(error / norm));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
}

template <int kHeadDim, bool kCausal>
void tune(int seqlen) {
  const int heads = 2048 / kHeadDim, batch = 16384 / seqlen;
  const std::size_t elems = static_cast<std::size_t>(batch) * heads * seqlen * kHeadDim;
  void *q, *k, *v, *o;
  for (void** p : {&q, &k, &v, &o}) CHECK(cudaMalloc(p, elems * 2));
  fill_random(DType::fp16, q, elems, 1.7f, 1, nullptr);
  fill_random(DType::fp16, k, elems, 1.7f, 2, nullptr);
  fill_random(DType::fp16, v, elems, 1.7f, 3, nullptr);
  ForwardParams params;
  params.batch = batch;
  params.heads = heads;
  params.seqlen_q = params.seqlen_k = seqlen;
  params.head_dim = kHeadDim;
  params.q = bhsd(q, heads, seqlen, kHeadDim);
  params.k = bhsd(k, heads, seqlen, kHeadDim);
  params.v = bhsd(v, heads, seqlen, kHeadDim);
  params.o = o;
  params.o_strides = params.q;
  params.softmax_scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
  params.causal = kCausal;
  forward(params, nullptr);
  CHECK(cudaDeviceSynchronize());
  const std::vector<double> shipped = to_host_double(DType::fp16, o, elems);
  std::printf("d=%d seqlen=%d batch=%d heads=%d%s\n", kHeadDim, seqlen, batch, heads,
              kCausal ? " causal" : "");
  time_config<ForwardTraits<kHeadDim, 128, 64, 4, 2>, kCausal>(params, shipped);  // shipped
  time_config<ForwardTraits<kHeadDim, 128, 64, 8, 1>, kCausal>(params, shipped);
  time_config<ForwardTraits<kHeadDim, 128, 128, 8, 1>, kCausal>(params, shipped);
  time_config<ForwardTraits<kHeadDim, 64, 64, 4, 2>, kCausal>(params, shipped);
  if constexpr (kHeadDim == 64) {
    time_config<ForwardTraits<kHeadDim, 64, 64, 4, 3>, kCausal>(params, shipped);
    time_config<ForwardTraits<kHeadDim, 128, 128, 4, 2>, kCausal>(params, shipped);  // spills 8 bytes
  }
  for (void* p : {q, k, v, o}) CHECK(cudaFree(p));
}

}  // namespace

int main() {
  tune<128, false>(2048);
  tune<128, false>(8192);
  tune<128, true>(8192);
  tune<64, false>(2048);
  tune<64, false>(8192);
  tune<64, true>(8192);
  return 0;
}
