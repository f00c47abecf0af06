#include "kernel_trace.hpp"

#include <cupti.h>
#include <cxxabi.h>
#include <fnmatch.h>

#include <cstdlib>
#include <mutex>

namespace kwbench {

namespace {

#define KW_CUPTI_CHECK(call)                                                                           \
  do {                                                                                                 \
    CUptiResult kw_result_ = (call);                                                                   \
    if (kw_result_ != CUPTI_SUCCESS) {                                                                 \
      const char* kw_text_ = nullptr;                                                                  \
      cuptiGetResultString(kw_result_, &kw_text_);                                                     \
      throw Error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #call +              \
                  " failed: " + (kw_text_ ? kw_text_ : std::to_string(static_cast<int>(kw_result_)))); \
    }                                                                                                  \
  } while (0)

// CUDA 13's CUPTI delivers CONCURRENT_KERNEL records as CUpti_ActivityKernel10.
using KernelRecord = CUpti_ActivityKernel10;
constexpr std::size_t kBufferBytes = 8 * 1024 * 1024;

std::mutex g_mutex;
std::vector<ObservedLaunch> g_launches;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* kernel = reinterpret_cast<const KernelRecord*>(record);
    ObservedLaunch launch;
    launch.kernel = demangle(kernel->name);
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

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && text != nullptr ? text : name;
  std::free(text);
  return out;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

KernelTrace::KernelTrace() {
  uint32_t version = 0;
  KW_CUPTI_CHECK(cuptiGetVersion(&version));
  // Records are read with the layout of the headers this was built with; a
  // CUPTI of another major version may deliver another layout.
  if (version / 10000 != CUPTI_API_VERSION / 10000) {
    throw Error("CUPTI API version " + std::to_string(version) +
                " at run time, but this harness was built for " + std::to_string(CUPTI_API_VERSION) +
                " (CUpti_ActivityKernel10 records); rebuild against this CUDA");
  }
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
