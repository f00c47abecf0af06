// Tile and warp configuration of the forward kernel, checked at compile time.
#pragma once

namespace kw::attention {

// kBlockM query rows per thread block, split over kWarps warps (16 or 32 rows
// each: one or two m16 MMA tiles); kBlockN keys per inner step. A warp with
// one m16 tile keeps its Q fragments in registers for the whole key loop;
// with two it re-reads them from shared memory (registers go to the O tile).
//
// kResidentKeys > 0: a short-sequence variant for grids too small to fill the
// GPU, where latency, not throughput, is the bound. Every K/V tile of up to
// that many keys sits in shared memory, copied in one go (the DRAM latency is
// paid once, not twice per key step), and the block's warps share its rows
// and split the key steps between them, merging their partial softmax
// states at the end.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocksPerSm_,
          int kResidentKeys_ = 0>
struct ForwardTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kResidentKeys = kResidentKeys_;
  static constexpr int kWarpRows = kResidentKeys > 0 ? kBlockM : kBlockM / kWarps;
  static constexpr int kMTiles = kWarpRows / 16;
  static constexpr bool kQInRegisters = kMTiles == 1;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row of 2-byte elements
  static constexpr int kRowBytes = kHeadDim * 2;
  static constexpr int kSmemQ = kBlockM * kRowBytes;
  static constexpr int kKeySlots = kResidentKeys > 0 ? kResidentKeys : kBlockN;
  static constexpr int kSmemK = kKeySlots * kRowBytes;
  static constexpr int kSmemV = kKeySlots * kRowBytes;
  static constexpr int kSmemBytes = kSmemQ + kSmemK + kSmemV;

  static_assert(kHeadDim % 64 == 0,
                "the XOR swizzle permutes groups of 8 16-byte chunks: head_dim % 64 == 0");
  static_assert(kBlockM % (16 * (kResidentKeys > 0 ? 1 : kWarps)) == 0, "each warp owns whole m16 tiles");
  static_assert(kMTiles == 1 || kMTiles == 2, "1 or 2 m16 tiles per warp fit the register file");
  static_assert(kBlockN % 16 == 0, "P V consumes keys 16 at a time");
  static_assert(kThreads % kChunks == 0, "a loader thread keeps one column chunk for every row it copies");
  static_assert((kBlockM * kChunks) % kThreads == 0 && (kBlockN * kChunks) % kThreads == 0,
                "tiles split evenly over the threads' 16-byte copies");
  static_assert(kResidentKeys % kBlockN == 0, "resident keys: whole key steps");
  static_assert(kResidentKeys == 0 || (kWarps * kBlockM * (kHeadDim + 2) * 4 <= kSmemK),
                "the key-split merge reuses the K slots");
  static_assert(kSmemQ % 256 == 0 && kSmemK % 256 == 0, "tiles start 256-byte aligned (XOR addressing)");
  static_assert(kSmemBytes * kMinBlocksPerSm <= 227 * 1024,
                "shared memory for kMinBlocksPerSm blocks on an SM");
  static_assert(kThreads * kMinBlocksPerSm <= 2048, "threads for kMinBlocksPerSm blocks on an SM");
};

}  // namespace kw::attention
