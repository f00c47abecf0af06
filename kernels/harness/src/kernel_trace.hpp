// Kernel launches observed with CUPTI activity tracing
// (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL): what actually ran, not what the
// bench says it ran.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kwbench/kwbench.hpp"

namespace kwbench {

struct ObservedLaunch {
  std::string kernel;  // demangled
  Dim3 grid, block;
  int registers = 0;
  std::int64_t static_smem = 0;
  std::int64_t dynamic_smem = 0;
  double duration_ns = 0;
};

class KernelTrace {
 public:
  // Enables tracing; throws kwbench::Error when CUPTI is missing or its
  // version does not match the record layout this harness was built with.
  KernelTrace();
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

  // Flushes and returns the launches recorded since construction; throws if
  // CUPTI dropped records (the observation would be incomplete).
  std::vector<ObservedLaunch> collect();
};

}  // namespace kwbench
