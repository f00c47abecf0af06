// The launch template: one instantiation per (head dim, dtype, causal), each
// with the tile configuration chosen for its head dim, plus the short-sequence
// variant at head dim 64 (docs/PERFORMANCE.md has the measurements behind the
// choices).
#pragma once

#include <mutex>
#include <string>

#include "forward_kernel.cuh"
#include "kw_attention/attention.hpp"

namespace kw::attention {

template <int kHeadDim>
struct ForwardConfig;
// 128 query rows over 4 warps (32 rows, two m16 tiles, per warp) and 64-key
// steps, 2 blocks per SM: each K/V fragment read from shared memory feeds two
// MMAs, which keeps shared-memory traffic under the tensor-core rate. It fits
// 255 registers without spills at both head dims; 128-key steps spill at head
// dim 64 and 16-row warps run 4-32% slower (kw-attention-tune, PERFORMANCE.md).
template <>
struct ForwardConfig<128> {
  using Traits = ForwardTraits<128, 128, 64, 4, 2>;
};
template <>
struct ForwardConfig<64> {
  using Traits = ForwardTraits<64, 128, 64, 4, 2>;
};

// Up to 512 keys at head dim 64 on grids that would leave most SMs idle (the
// user's B = H = 1 shapes): 16-row blocks whose 4 warps split the key steps,
// every K/V tile resident (130 KiB).
struct ShortConfig {
  static constexpr int kHeadDim = 64;
  static constexpr int kMaxKeys = 512;
  using Traits = ForwardTraits<64, 16, 64, 4, 1, kMaxKeys>;
};

template <typename T>
struct DTypeName;
template <>
struct DTypeName<__half> {
  static constexpr const char* value = "fp16";
  static constexpr const char* demangled = "__half";
};
template <>
struct DTypeName<__nv_bfloat16> {
  static constexpr const char* value = "bf16";
  static constexpr const char* demangled = "__nv_bfloat16";
};

template <typename Traits_, typename T, bool kCausal>
struct ForwardInstance {
  using Traits = Traits_;
  static constexpr int kHeadDim = Traits::kHeadDim;
  static constexpr auto kernel = &attention_forward_kernel<Traits, T, kCausal>;

  static void configure() {
    static std::once_flag once;
    static cudaError_t status = cudaSuccess;
    std::call_once(once, [] {
      status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes);
    });
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, ") +
                               std::to_string(Traits::kSmemBytes) +
                               ") failed: " + cudaGetErrorString(status));
    }
  }

  static dim3 grid(const ForwardParams& params) {
    return dim3(static_cast<unsigned>((params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
                static_cast<unsigned>(params.heads), static_cast<unsigned>(params.batch));
  }

  static void launch(const ForwardParams& params, cudaStream_t stream) {
    configure();
    kernel<<<grid(params), Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
    cudaError_t status = cudaGetLastError();
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string("attention forward launch failed: ") + cudaGetErrorName(status) +
                               " (" + cudaGetErrorString(status) + ")");
    }
  }

  static std::string name() {
    return std::string("attention_forward<d") + std::to_string(kHeadDim) + "," + DTypeName<T>::value +
           (kCausal ? ",causal" : "") + (Traits::kResidentKeys > 0 ? ",short>" : ">");
  }

  // Glob over the demangled name CUPTI reports for this instantiation.
  static std::string pattern() {
    return std::string("void kw::attention::attention_forward_kernel<kw::attention::ForwardTraits<") +
           std::to_string(kHeadDim) + ", " + std::to_string(Traits::kBlockM) + ", " +
           std::to_string(Traits::kBlockN) + ", *>, " + DTypeName<T>::demangled + ", " +
           (kCausal ? "true" : "false") + ">*";
  }

  static KernelEntry entry() {
    return {name(), reinterpret_cast<const void*>(kernel), Traits::kThreads,
            static_cast<std::size_t>(Traits::kSmemBytes), [] { configure(); }};
  }
};

// Fewer blocks than this leave an H100-class GPU (132 SMs) mostly idle.
constexpr std::int64_t kFewBlocks = 132;

// The short-sequence variant where it applies, else the streaming one.
template <int kHeadDim, typename T, typename Fn>
void with_instance(const ForwardParams& params, Fn&& fn) {
  using Long = typename ForwardConfig<kHeadDim>::Traits;
  const std::int64_t long_blocks = static_cast<std::int64_t>(params.batch) * params.heads *
                                   ((params.seqlen_q + Long::kBlockM - 1) / Long::kBlockM);
  if constexpr (kHeadDim == ShortConfig::kHeadDim) {
    using Short = ShortConfig::Traits;
#ifdef KW_ATTENTION_REPLAY_DISPATCH_BUG  // a test build only (CMakeLists.txt)
    const bool is_short = params.seqlen_k < ShortConfig::kMaxKeys && long_blocks < kFewBlocks;
#else
    const bool is_short = params.seqlen_k <= ShortConfig::kMaxKeys && long_blocks < kFewBlocks;
#endif
    if (is_short && params.causal) return fn(ForwardInstance<Short, T, true>{});
    if (is_short) return fn(ForwardInstance<Short, T, false>{});
  }
  if (params.causal) return fn(ForwardInstance<Long, T, true>{});
  return fn(ForwardInstance<Long, T, false>{});
}

template <int kHeadDim, typename T>
void launch_forward(const ForwardParams& params, cudaStream_t stream) {
  with_instance<kHeadDim, T>(params, [&](auto instance) { instance.launch(params, stream); });
}

template <int kHeadDim, typename T>
LaunchShape forward_launch_shape(const ForwardParams& params) {
  LaunchShape shape;
  with_instance<kHeadDim, T>(params, [&](auto instance) {
    using Instance = decltype(instance);
    shape = {Instance::pattern(), Instance::grid(params), dim3(Instance::Traits::kThreads),
             static_cast<std::size_t>(Instance::Traits::kSmemBytes)};
  });
  return shape;
}

template <int kHeadDim, typename T>
void append_kernels(std::vector<KernelEntry>& out) {
  using Long = typename ForwardConfig<kHeadDim>::Traits;
  out.push_back(ForwardInstance<Long, T, false>::entry());
  out.push_back(ForwardInstance<Long, T, true>::entry());
  if constexpr (kHeadDim == ShortConfig::kHeadDim) {
    out.push_back(ForwardInstance<ShortConfig::Traits, T, false>::entry());
    out.push_back(ForwardInstance<ShortConfig::Traits, T, true>::entry());
  }
}

// Each (head dim, dtype) is instantiated in its own file (forward_*.cu) so
// the kernels compile in parallel; everyone else sees extern declarations.
#define KW_ATTENTION_INSTANTIATIONS(PREFIX, HEAD_DIM, TYPE)                                \
  PREFIX template void launch_forward<HEAD_DIM, TYPE>(const ForwardParams&, cudaStream_t); \
  PREFIX template LaunchShape forward_launch_shape<HEAD_DIM, TYPE>(const ForwardParams&);  \
  PREFIX template void append_kernels<HEAD_DIM, TYPE>(std::vector<KernelEntry>&);

KW_ATTENTION_INSTANTIATIONS(extern, 64, __half)
KW_ATTENTION_INSTANTIATIONS(extern, 128, __half)
KW_ATTENTION_INSTANTIATIONS(extern, 64, __nv_bfloat16)
KW_ATTENTION_INSTANTIATIONS(extern, 128, __nv_bfloat16)

}  // namespace kw::attention
