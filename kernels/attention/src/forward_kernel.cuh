// The forward kernel: one thread block per (query tile, head, batch). Each
// warp owns 16 or 32 query rows; K and V tiles stream through shared memory
// with cp.async (V of step n loads during S = Q K^T of step n, K of step n+1
// during O += P V of step n), scores stay in registers as MMA accumulators and
// are reused directly as the A operand of P V. The short-sequence variant
// (Traits::kResidentKeys > 0) loads all of K and V at once and lets the warps
// of a 16-row block split the key steps instead.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kw_attention/attention.hpp"
#include "ptx.cuh"
#include "traits.hpp"

namespace kw::attention {

namespace detail {

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile whose rows are
// kChunks chunks long. XOR-ing the chunk with the row's low three bits puts the
// eight rows one ldmatrix phase reads in eight different bank groups.
template <typename Traits>
__device__ __forceinline__ std::uint32_t swizzled(int row, int chunk) {
  return static_cast<std::uint32_t>(row * Traits::kRowBytes + ((chunk ^ (row & 7)) * 16));
}

// Copies rows [row_begin, row_begin + kRows) of a [rows, head_dim] matrix into
// shared memory; rows at or past row_limit are zero-filled. Offsets within one
// (batch, head) matrix fit 32 bits (validate() checks), which keeps the
// per-row addresses out of 64-bit registers.
template <typename Traits, int kRows, typename T>
__device__ __forceinline__ void load_tile(std::uint32_t smem, const T* matrix, int row_stride, int row_begin,
                                          int row_limit, int tid) {
  constexpr int kRowsPerPass = Traits::kThreads / Traits::kChunks;
  const int chunk = tid % Traits::kChunks;
  const int first_row = tid / Traits::kChunks;
  const T* column = matrix + chunk * 8;
  const std::uint32_t target = smem + detail::swizzled<Traits>(first_row, chunk);
#pragma unroll
  for (int pass = 0; pass < kRows / kRowsPerPass; ++pass) {
    const int row = row_begin + first_row + pass * kRowsPerPass;
    const bool valid = row < row_limit;
    // Rows step by multiples of 8, so the swizzle of first_row holds for all.
    ptx::cp_async_16(target + pass * kRowsPerPass * Traits::kRowBytes,
                     column + (valid ? row * row_stride : 0), valid);
  }
}

// Key-split blocks: each warp holds (max, partial sums, unnormalised O) of the
// same 16 rows over its own key steps. Merged through shared memory (the K
// slots, free once every warp is done) and written with 16-byte stores.
template <typename Traits, typename T>
__device__ __forceinline__ void combine_key_splits(const ForwardParams& params, unsigned char* smem,
                                                   float (&acc_o)[Traits::kHeadDim / 8][4],
                                                   const float (&row_max)[2], const float (&row_sum)[2], T* o,
                                                   int row0, int batch, int head, int warp, int lane,
                                                   int tid) {
  constexpr int kRows = Traits::kBlockM;
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kWarps = Traits::kWarps;
  static_assert(kRows == 16, "a key-split block covers one m16 tile of rows");
  float* partial_o = reinterpret_cast<float*>(smem + Traits::kSmemQ);  // [kWarps][kRows][kHeadDim]
  float* partial_max = partial_o + kWarps * kRows * kHeadDim;          // [kWarps][kRows]
  float* partial_sum = partial_max + kWarps * kRows;                   // [kWarps][kRows]
  __syncthreads();                                                     // every warp is done reading K/V
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = lane / 4 + half * 8;
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (lane % 4 == 0) {
      partial_max[warp * kRows + row] = row_max[half];
      partial_sum[warp * kRows + row] = sum;
    }
#pragma unroll
    for (int dt = 0; dt < kHeadDim / 8; ++dt) {
      float* out = partial_o + (warp * kRows + row) * kHeadDim + dt * 8 + 2 * (lane % 4);
      out[0] = acc_o[dt][2 * half];
      out[1] = acc_o[dt][2 * half + 1];
    }
  }
  __syncthreads();

  constexpr int kPerThread = kRows * kHeadDim / Traits::kThreads;
  static_assert(kPerThread == 8, "each thread finishes 8 consecutive outputs (one 16-byte store)");
  const int row = tid * kPerThread / kHeadDim;
  const int col = tid * kPerThread % kHeadDim;
  float max = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) max = fmaxf(max, partial_max[w * kRows + row]);
  const float base = max == -INFINITY ? 0.f : max;
  float sum = 0.f, value[kPerThread] = {};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float weight = ptx::exp2_approx(partial_max[w * kRows + row] - base);
    sum += weight * partial_sum[w * kRows + row];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i)
      value[i] += weight * partial_o[(w * kRows + row) * kHeadDim + col + i];
  }
  if (row0 + row >= params.seqlen_q) return;
  const float inverse = sum > 0.f ? 1.f / sum : 0.f;
  uint4 packed;
  packed.x = ptx::pack2<T>(value[0] * inverse, value[1] * inverse);
  packed.y = ptx::pack2<T>(value[2] * inverse, value[3] * inverse);
  packed.z = ptx::pack2<T>(value[4] * inverse, value[5] * inverse);
  packed.w = ptx::pack2<T>(value[6] * inverse, value[7] * inverse);
  *reinterpret_cast<uint4*>(o + (row0 + row) * params.o_strides.row_stride + col) = packed;
  if (params.lse != nullptr && col == 0) {
    constexpr float kLn2 = 0.6931471805599453f;
    const std::int64_t index =
        (static_cast<std::int64_t>(batch) * params.heads + head) * params.seqlen_q + row0 + row;
    params.lse[index] = sum > 0.f ? (max + log2f(sum)) * kLn2 : -INFINITY;
  }
}

// The injected slowdown (ForwardParams::spin_cycles): the block that
// finishes last spins, so the kernel ends that many cycles later.
__device__ inline void spin_if_last_block(const ForwardParams& params) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
  if (atomicAdd(params.spin_counter, 1u) != blocks - 1) return;
  *params.spin_counter = 0;  // ready for the stream's next launch
  const long long until = clock64() + params.spin_cycles;
  while (clock64() < until) {
  }
}

}  // namespace detail

template <typename Traits, typename T, bool kCausal>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    attention_forward_kernel(const ForwardParams params) {
  constexpr int kHeadDim = Traits::kHeadDim;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kMTiles = Traits::kMTiles;
  constexpr int kNTiles = kBlockN / 8;    // score accumulator tiles per m16 tile
  constexpr int kDTiles = kHeadDim / 8;   // output accumulator tiles per m16 tile
  constexpr int kDSteps = kHeadDim / 16;  // k16 steps of Q K^T
  constexpr float kLog2e = 1.4426950408889634f;

  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t q_smem = ptx::smem_address(smem);
  constexpr bool kResident = Traits::kResidentKeys > 0;
  constexpr int kTileBytes = kBlockN * Traits::kRowBytes;
  const std::uint32_t k_smem = q_smem + Traits::kSmemQ;
  const std::uint32_t v_smem = k_smem + Traits::kSmemK;
  if (q_smem % 256 != 0) __trap();  // the XOR addressing below needs 256-byte aligned tiles
  if (params.spin_cycles > 0 && params.spin_counter == nullptr) {
    const long long until = clock64() + params.spin_cycles;
    while (clock64() < until) {
    }
  }

  // Causal blocks get heavier with the query index: start the heavy ones first.
  const int m_block = kCausal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int row0 = m_block * kBlockM;

  const T* q =
      static_cast<const T*>(params.q.data) + batch * params.q.batch_stride + head * params.q.head_stride;
  const T* k =
      static_cast<const T*>(params.k.data) + batch * params.k.batch_stride + head * params.k.head_stride;
  const T* v =
      static_cast<const T*>(params.v.data) + batch * params.v.batch_stride + head * params.v.head_stride;
  T* o =
      static_cast<T*>(params.o) + batch * params.o_strides.batch_stride + head * params.o_strides.head_stride;

  const int kv_end = kCausal ? min(params.seqlen_k, row0 + kBlockM) : params.seqlen_k;
  const int n_blocks = (kv_end + kBlockN - 1) / kBlockN;
  const float scale_log2 = params.softmax_scale * kLog2e;
  const int q_stride = static_cast<int>(params.q.row_stride);
  const int k_stride = static_cast<int>(params.k.row_stride);
  const int v_stride = static_cast<int>(params.v.row_stride);

  detail::load_tile<Traits, kBlockM>(q_smem, q, q_stride, row0, params.seqlen_q, tid);
  if constexpr (kResident) {
    // Every K/V tile gets its own slot, all copies issued now: the DRAM
    // latency is paid once.
    for (int nb = 0; nb < n_blocks; ++nb) {
      detail::load_tile<Traits, kBlockN>(k_smem + nb * kTileBytes, k, k_stride, nb * kBlockN, params.seqlen_k,
                                         tid);
      detail::load_tile<Traits, kBlockN>(v_smem + nb * kTileBytes, v, v_stride, nb * kBlockN, params.seqlen_k,
                                         tid);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    __syncthreads();
  } else {
    detail::load_tile<Traits, kBlockN>(k_smem, k, k_stride, 0, params.seqlen_k, tid);
    ptx::cp_async_commit();
  }

  // ldmatrix addresses: each lane's row and chunk, swizzled, are fixed for
  // the whole kernel. Row offsets added later are multiples of 8 rows (they
  // keep the swizzle key) and chunk offsets are even, landing on address bits
  // 5-7 only, so a step's address is this base XOR a constant plus a constant.
  const int warp_row = kResident ? 0 : warp * Traits::kWarpRows;
  const std::uint32_t q_base = q_smem + detail::swizzled<Traits>(warp_row + lane % 16, lane / 16);
  const std::uint32_t k_base = k_smem + detail::swizzled<Traits>(lane % 8 + (lane / 16) * 8, (lane / 8) % 2);
  const std::uint32_t v_base = v_smem + detail::swizzled<Traits>(lane % 16, lane / 16);

  float acc_o[kMTiles][kDTiles][4];
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] = 0.f;
    }
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  std::uint32_t q_frag[Traits::kQInRegisters ? kDSteps : 1][4];

  // Resident: the warps share the block's rows and take key steps in turn
  // (combined at the end); streamed: each warp owns its rows, all steps.
  const int first_nb = kResident ? warp : 0;
  for (int nb = first_nb; nb < n_blocks; nb += kResident ? Traits::kWarps : 1) {
    std::uint32_t k_tile = k_base, v_tile = v_base;
    if constexpr (kResident) {
      k_tile += nb * kTileBytes;
      v_tile += nb * kTileBytes;
    } else {
      ptx::cp_async_wait<0>();
      __syncthreads();  // K[nb] (and Q) landed; every warp is done with V[nb-1]
      detail::load_tile<Traits, kBlockN>(v_smem, v, v_stride, nb * kBlockN, params.seqlen_k, tid);
      ptx::cp_async_commit();
    }

    if constexpr (Traits::kQInRegisters) {
      if (nb == first_nb) {
#pragma unroll
        for (int ks = 0; ks < kDSteps; ++ks) ptx::ldmatrix_x4(q_frag[ks], q_base ^ (ks << 5));
      }
    }

    // S = Q K^T for this warp's rows and the kBlockN keys of step nb.
    float acc_s[kMTiles][kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[mt][nt][e] = 0.f;
      }
    }
#pragma unroll
    for (int ks = 0; ks < kDSteps; ++ks) {
      std::uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (Traits::kQInRegisters) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[ks][e];
        } else {
          ptx::ldmatrix_x4(a[mt], (q_base ^ (ks << 5)) + mt * 16 * Traits::kRowBytes);
        }
      }
#pragma unroll
      for (int nt2 = 0; nt2 < kNTiles / 2; ++nt2) {
        std::uint32_t b[4];
        ptx::ldmatrix_x4(b, (k_tile ^ (ks << 5)) + nt2 * 16 * Traits::kRowBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ptx::mma_16816<T>(acc_s[mt][2 * nt2], a[mt], b[0], b[1]);
          ptx::mma_16816<T>(acc_s[mt][2 * nt2 + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // Keys past the sequence end, and (causal) keys after the query, get -inf:
    // per row, the first masked column relative to this lane's first column.
    const int col0 = nb * kBlockN;
    if (col0 + kBlockN > params.seqlen_k || (kCausal && col0 + kBlockN - 1 > row0 + warp_row)) {
      const int lane_col = col0 + 2 * (lane % 4);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          int limit = params.seqlen_k;
          if constexpr (kCausal) limit = min(limit, row0 + warp_row + mt * 16 + lane / 4 + half * 8 + 1);
          limit -= lane_col;
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            if (nt * 8 >= limit) acc_s[mt][nt][2 * half] = -INFINITY;
            if (nt * 8 + 1 >= limit) acc_s[mt][nt][2 * half + 1] = -INFINITY;
          }
        }
      }
    }

    // Online softmax, in base 2 with the scale folded in: a row's four lanes
    // (a quad) share its maximum; sums stay per lane until the end.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
          tile_max = fmaxf(tile_max, fmaxf(acc_s[mt][nt][2 * half], acc_s[mt][nt][2 * half + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float new_max = fmaxf(row_max[mt][half], tile_max * scale_log2);
        // A row with every key masked so far keeps max -inf; subtracting 0
        // instead keeps exp2(-inf - max) at 0 rather than NaN.
        const float base = new_max == -INFINITY ? 0.f : new_max;
        const float correction = ptx::exp2_approx(row_max[mt][half] - base);
        row_max[mt][half] = new_max;
        row_sum[mt][half] *= correction;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          acc_o[mt][dt][2 * half] *= correction;
          acc_o[mt][dt][2 * half + 1] *= correction;
        }
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; ++e) {
            const float p = ptx::exp2_approx(fmaf(acc_s[mt][nt][e], scale_log2, -base));
            acc_s[mt][nt][e] = p;
            row_sum[mt][half] += p;
          }
        }
      }
    }

    std::uint32_t p_frag[kBlockN / 16][kMTiles][4];
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        p_frag[ks][mt][0] = ptx::pack2<T>(acc_s[mt][2 * ks][0], acc_s[mt][2 * ks][1]);
        p_frag[ks][mt][1] = ptx::pack2<T>(acc_s[mt][2 * ks][2], acc_s[mt][2 * ks][3]);
        p_frag[ks][mt][2] = ptx::pack2<T>(acc_s[mt][2 * ks + 1][0], acc_s[mt][2 * ks + 1][1]);
        p_frag[ks][mt][3] = ptx::pack2<T>(acc_s[mt][2 * ks + 1][2], acc_s[mt][2 * ks + 1][3]);
      }
    }

    if constexpr (!kResident) {
      ptx::cp_async_wait<0>();
      __syncthreads();  // V[nb] landed; every warp is done with K[nb]
      if (nb + 1 < n_blocks) {
        detail::load_tile<Traits, kBlockN>(k_smem, k, k_stride, (nb + 1) * kBlockN, params.seqlen_k, tid);
      }
      ptx::cp_async_commit();
    }

    // O += P V: the score accumulators of two adjacent n8 tiles are exactly the
    // A fragment of one k16 step.
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      const std::uint32_t(&a)[kMTiles][4] = p_frag[ks];
#pragma unroll
      for (int dt2 = 0; dt2 < kDTiles / 2; ++dt2) {
        std::uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, (v_tile ^ (dt2 << 5)) + ks * 16 * Traits::kRowBytes);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          ptx::mma_16816<T>(acc_o[mt][2 * dt2], a[mt], b[0], b[1]);
          ptx::mma_16816<T>(acc_o[mt][2 * dt2 + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
  ptx::cp_async_wait<0>();

  if constexpr (kResident) {
    detail::combine_key_splits<Traits, T>(params, smem, acc_o[0], row_max[0], row_sum[0], o, row0, batch,
                                          head, warp, lane, tid);
  } else {
    // Normalise and write O (and the log-sum-exp) for rows inside the sequence.
    constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float sum = row_sum[mt][half];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inverse = sum > 0.f ? 1.f / sum : 0.f;
        const int row = row0 + warp_row + mt * 16 + lane / 4 + half * 8;
        if (row < params.seqlen_q) {
          T* out = o + row * params.o_strides.row_stride + 2 * (lane % 4);
#pragma unroll
          for (int dt = 0; dt < kDTiles; ++dt) {
            *reinterpret_cast<std::uint32_t*>(out + dt * 8) =
                ptx::pack2<T>(acc_o[mt][dt][2 * half] * inverse, acc_o[mt][dt][2 * half + 1] * inverse);
          }
          if (params.lse != nullptr && lane % 4 == 0) {
            const std::int64_t index =
                (static_cast<std::int64_t>(batch) * params.heads + head) * params.seqlen_q + row;
            params.lse[index] = sum > 0.f ? (row_max[mt][half] + log2f(sum)) * kLn2 : -INFINITY;
          }
        }
      }
    }
  }
  if (params.spin_cycles > 0 && params.spin_counter != nullptr) detail::spin_if_last_block(params);
}

}  // namespace kw::attention
