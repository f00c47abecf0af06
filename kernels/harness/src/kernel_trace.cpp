#include "kernel_trace.hpp"

#include "cupti_kernel_record.hpp"
#include "kw/common/demangle.hpp"

#include <fnmatch.h>

#include <cstdlib>
#include <mutex>

namespace kwbench {

namespace {

#define KW_CUPTI_CHECK(call)                                                              \
  do {                                                                                    \
    CUptiResult kw_result_ = (call);                                                      \
    if (kw_result_ != CUPTI_SUCCESS) {                                                    \
      throw Error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call + \
                  " failed: " + cupti::result_text(kw_result_));                          \
    }                                                                                     \
  } while (0)

std::mutex g_mutex;
std::vector<ObservedLaunch> g_launches;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, cupti::kBufferBytes));
  *size = *buffer == nullptr ? 0 : cupti::kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    const cupti::KernelRecord* kernel = cupti::kernel_of(record);
    if (kernel == nullptr) continue;
    ObservedLaunch launch;
    launch.kernel = kw::common::demangle(kernel->name);
    launch.grid = {kernel->gridX, kernel->gridY, kernel->gridZ};
    launch.block = {kernel->blockX, kernel->blockY, kernel->blockZ};
    launch.registers = kernel->registersPerThread;
    launch.static_smem = kernel->staticSharedMemory;
    launch.dynamic_smem = kernel->dynamicSharedMemory;
    launch.duration_ns = static_cast<double>(kernel->end - kernel->start);
    g_launches.push_back(std::move(launch));
  }
  std::free(buffer);
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

KernelTrace::KernelTrace() {
  if (std::string problem = cupti::version_problem(); !problem.empty()) throw Error(problem);
  {
    std::lock_guard lock(g_mutex);
    g_launches.clear();
  }
  KW_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  KW_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

KernelTrace::~KernelTrace() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(1);
}

std::vector<ObservedLaunch> KernelTrace::collect() {
  KW_CUDA_CHECK(cudaDeviceSynchronize());
  KW_CUPTI_CHECK(cuptiActivityFlushAll(1));
  size_t dropped = 0;
  KW_CUPTI_CHECK(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped));
  if (dropped > 0) {
    throw Error("CUPTI dropped " + std::to_string(dropped) +
                " activity records; the observed launches are incomplete");
  }
  std::lock_guard lock(g_mutex);
  return g_launches;
}

}  // namespace kwbench
