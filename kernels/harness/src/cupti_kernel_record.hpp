// A CUPTI kernel activity record as kernelwatch reads it, shared by the
// harness's own trace (kernel_trace.cpp) and libkw_inject.so, which records
// the launches of any process: both must read the same layout the same way.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <string>

namespace kwbench::cupti {

// CUDA 13's CUPTI delivers CONCURRENT_KERNEL records as CUpti_ActivityKernel10.
using KernelRecord = CUpti_ActivityKernel10;
inline constexpr std::size_t kBufferBytes = std::size_t{8} * 1024 * 1024;

// The record's kernel fields, or null for any other kind of record.
inline const KernelRecord* kernel_of(const CUpti_Activity* record) {
  if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
    return nullptr;
  return reinterpret_cast<const KernelRecord*>(record);
}

inline std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text != nullptr ? text : "CUPTI error " + std::to_string(static_cast<int>(result));
}

// Empty when the CUPTI loaded delivers the record layout of the headers this
// was built with; a CUPTI of another major version may deliver another.
inline std::string version_problem() {
  uint32_t version = 0;
  if (CUptiResult result = cuptiGetVersion(&version); result != CUPTI_SUCCESS)
    return "cuptiGetVersion failed: " + result_text(result);
  if (version / 10000 == CUPTI_API_VERSION / 10000) return {};
  return "CUPTI API version " + std::to_string(version) + " at run time, but this was built for " +
         std::to_string(CUPTI_API_VERSION) + " (CUpti_ActivityKernel10 records); rebuild against this CUDA";
}

}  // namespace kwbench::cupti
