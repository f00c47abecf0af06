#include "kw/common/occupancy.hpp"

#include <algorithm>
#include <array>

namespace kw::common {

namespace {

struct Row {
  std::string_view cc;
  int max_warps, max_blocks, shared_kb, block_shared_kb, reserved_kb;
};

// CUDA Programming Guide, "Technical Specifications per Compute Capability".
constexpr std::array<Row, 12> kTable = {{{"7.0", 64, 32, 96, 96, 0},
                                         {"7.2", 64, 32, 96, 96, 0},
                                         {"7.5", 32, 16, 64, 64, 0},
                                         {"8.0", 64, 32, 164, 163, 1},
                                         {"8.6", 48, 16, 100, 99, 1},
                                         {"8.7", 48, 16, 164, 163, 1},
                                         {"8.9", 48, 24, 100, 99, 1},
                                         {"9.0", 64, 32, 228, 227, 1},
                                         {"10.0", 64, 32, 228, 227, 1},
                                         {"10.3", 64, 32, 228, 227, 1},
                                         {"12.0", 48, 32, 100, 99, 1},
                                         {"12.1", 48, 32, 100, 99, 1}}};

// As cuda_occupancy.h allocates for compute capability 7.0 and later.
constexpr int kWarpSize = 32;
constexpr int kRegisterUnit = 256;  // registers go to a warp in units of 256
constexpr int kSubPartitions = 4;
constexpr int kMaxRegistersPerThread = 255;

std::int64_t round_up(std::int64_t value, std::int64_t unit) {
  return (value + unit - 1) / unit * unit;
}

}  // namespace

std::optional<SmLimits> sm_limits(std::string_view compute_capability) {
  for (const Row& row : kTable) {
    if (row.cc != compute_capability) continue;
    SmLimits sm;
    sm.max_warps = row.max_warps;
    sm.max_blocks = row.max_blocks;
    sm.shared_bytes = std::int64_t{row.shared_kb} * 1024;
    sm.shared_bytes_per_block = std::int64_t{row.block_shared_kb} * 1024;
    sm.reserved_shared_bytes = std::int64_t{row.reserved_kb} * 1024;
    sm.shared_unit = row.reserved_kb > 0 ? 128 : 256;
    return sm;
  }
  return std::nullopt;
}

Occupancy theoretical_occupancy(const SmLimits& sm, std::int64_t threads_per_block, int registers_per_thread,
                                std::int64_t shared_bytes_per_block) {
  Occupancy out;
  struct Limit {
    std::int64_t blocks;
    const char* name;
  };
  const std::int64_t warps = (std::max<std::int64_t>(threads_per_block, 1) + kWarpSize - 1) / kWarpSize;
  // Registers go to each of the SM's four sub-partitions, a warp's rounded
  // up to the allocation unit; a block must also fit the per-block file.
  const std::int64_t per_warp =
      round_up(std::int64_t{std::max(registers_per_thread, 1)} * kWarpSize, kRegisterUnit);
  const bool registers_fit = registers_per_thread <= kMaxRegistersPerThread &&
                             per_warp * round_up(warps, kSubPartitions) <= sm.registers;
  const std::int64_t by_registers =
      registers_fit ? sm.registers / kSubPartitions / per_warp * kSubPartitions / warps : 0;
  const std::int64_t shared = round_up(shared_bytes_per_block + sm.reserved_shared_bytes, sm.shared_unit);
  // The opt-in limit is on what a block asks for; the reserved part comes on top.
  const std::int64_t by_shared = shared > sm.shared_bytes_per_block + sm.reserved_shared_bytes ? 0
                                 : shared <= 0                                                 ? sm.max_blocks
                                               : sm.shared_bytes / shared;
  const std::array<Limit, 4> limits = {{{warps > sm.max_warps ? 0 : sm.max_warps / warps, "warps"},
                                        {sm.max_blocks, "blocks"},
                                        {by_registers, "registers"},
                                        {by_shared, "shared memory"}}};
  // The first limit reached, in this order where several tie.
  const Limit* tightest = &limits[0];
  for (const Limit& limit : limits) {
    if (limit.blocks < tightest->blocks) tightest = &limit;
  }
  out.blocks_per_sm = static_cast<int>(tightest->blocks);
  out.warps_per_sm = static_cast<int>(tightest->blocks * warps);
  out.fraction = static_cast<double>(out.warps_per_sm) / sm.max_warps;
  out.limited_by =
      out.blocks_per_sm == 0 ? "does not fit (" + std::string(tightest->name) + ")" : tightest->name;
  return out;
}

}  // namespace kw::common
