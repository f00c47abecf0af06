// The kernel each case of the attention bench must launch, written out by
// hand and reviewed like code: a change meant to move a shape to another
// kernel changes this table in the same commit.
//
// It is deliberately not computed from the dispatch in src/launch.cuh. An
// expectation asked of the code that launches agrees with that code's
// mistakes: when a `<=` became `<` and sent S = 512 to the streaming kernel,
// expected and observed launches matched, and only the case's 2.6x slowdown
// gave it away (DESIGN.md's incident table). Against this table the same
// mistake fails launch_geometry.
#pragma once

#include <cstdint>
#include <string>

#include "kwbench/kwbench.hpp"

namespace kw::attention::expected {

// A kernel variant as the launch shows it: the tile sizes in its template
// arguments, its threads, and the dynamic shared memory it asks for (the Q
// tile plus the K and V tiles, or every key resident, at 2 bytes a value).
struct Variant {
  int head_dim, block_m, block_n, threads, dynamic_smem;
};

inline constexpr Variant kShortD64{64, 16, 64, 128, 16 * 128 + 2 * 512 * 128};         // 130 KiB
inline constexpr Variant kStreamingD64{64, 128, 64, 128, 128 * 128 + 2 * 64 * 128};    // 32 KiB
inline constexpr Variant kStreamingD128{128, 128, 64, 128, 128 * 256 + 2 * 64 * 256};  // 64 KiB

// First match wins, over the case names of attention_bench.cu. The short
// kernel takes head dim 64 with at most 512 keys on grids too small for the
// GPU (fewer than 132 streaming blocks: B x H x ceil(Sq / 128)).
struct Rule {
  const char* case_glob;
  const Variant& variant;
};
inline constexpr Rule kRules[] = {
    {"attention/*/d64/b1h1q64k1024*", kStreamingD64},  // more keys than the short kernel holds
    {"attention/*/d64/b1h1s*", kShortD64},             // 1 to 4 blocks
    {"attention/*/d64/b1h1q*", kShortD64},
    {"attention/*/d64/b2h4s128*", kShortD64},  // 8 blocks
    {"attention/*/d64/*", kStreamingD64},      // the flash-attention shapes: 4,096 blocks and up
    {"attention/*/d128/*", kStreamingD128},
};

struct LaunchedShape {
  std::string case_name, dtype_demangled;  // "__half" or "__nv_bfloat16"
  int batch, heads, seqlen_q;
  bool causal;
};

// Throws when no rule names the case: a new shape needs its row.
inline kwbench::ExpectedLaunch launch_for(const LaunchedShape& shape) {
  for (const Rule& rule : kRules) {
    if (!kwbench::glob_match(rule.case_glob, shape.case_name)) continue;
    const Variant& v = rule.variant;
    kwbench::ExpectedLaunch expected;
    expected.kernel_pattern = "void kw::attention::attention_forward_kernel<kw::attention::ForwardTraits<" +
                              std::to_string(v.head_dim) + ", " + std::to_string(v.block_m) + ", " +
                              std::to_string(v.block_n) + ", *>, " + shape.dtype_demangled + ", " +
                              (shape.causal ? "true" : "false") + ">*";
    expected.block = {v.threads, 1, 1};
    expected.grid = kwbench::Dim3{(shape.seqlen_q + v.block_m - 1) / v.block_m, shape.heads, shape.batch};
    expected.max_registers = 255;
    expected.max_shared_bytes = v.dynamic_smem;
    return expected;
  }
  throw kwbench::Error("expected_launches.hpp has no rule for case " + shape.case_name);
}

}  // namespace kw::attention::expected
