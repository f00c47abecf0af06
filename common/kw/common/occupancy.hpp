// Theoretical occupancy of a kernel launch: how many of its blocks one SM
// holds at once, given the block size, registers per thread and shared
// memory per block, against the SM's limits for the device's compute
// capability (the CUDA Programming Guide's table, the occupancy calculator's
// allocation rules). A regression explanation shows it for base and head.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kw::common {

struct SmLimits {
  int max_warps = 64;
  int max_blocks = 32;
  int registers = 65536;
  std::int64_t shared_bytes = 0;            // the most one SM can give its blocks
  std::int64_t shared_bytes_per_block = 0;  // the most one block may ask for (opt-in)
  std::int64_t reserved_shared_bytes = 0;   // the system's share of each block (1 KB from CC 8.0)
  std::int64_t shared_unit = 128;           // allocation granularity
};

// nullopt for a compute capability the table does not know ("3.5", "").
std::optional<SmLimits> sm_limits(std::string_view compute_capability);

struct Occupancy {
  int blocks_per_sm = 0;
  int warps_per_sm = 0;
  double fraction = 0;  // resident warps over the SM's maximum
  // "warps", "blocks", "registers" or "shared memory"; "does not fit (...)" at 0 blocks
  std::string limited_by;
};

Occupancy theoretical_occupancy(const SmLimits& sm, std::int64_t threads_per_block, int registers_per_thread,
                                std::int64_t shared_bytes_per_block);

}  // namespace kw::common
