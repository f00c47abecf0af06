// libkw_inject.so: a CUPTI injection library. The CUDA driver loads it into a
// process whose environment names it in CUDA_INJECTION64_PATH and calls
// InitializeInjection() at the process's first CUDA call; from then on every
// kernel launch is recorded (demangled name, grid, block, registers, static
// and dynamic shared memory, duration), whatever made the process: a kwbench,
// Google Benchmark or NVBench executable, Python. The agent's
// launch_geometry stage reads the records of benches that have no trace of
// their own.
//
// Output: KW_INJECT_OUT names a directory; each process (children too, which
// inherit the environment) appends JSON lines to launches-<pid>.jsonl there:
//   {"start": {"pid": P, "exe": "..."}}
//   {"kernel": "...", "grid": [x, y, z], "block": [x, y, z], "registers": R,
//    "static_smem": B, "dynamic_smem": B, "duration_ns": NS}   one per launch
//   {"failed_launch": {"kernel": "...", "error": "CUDA_ERROR_INVALID_VALUE",
//    "grid": [...], "block": [...], "dynamic_smem": B, "static_smem": B,
//    "max_dynamic_smem": B, "max_threads_per_block": T, "registers": R}}
//      a launch the driver refused: what it asked for against what the
//      kernel allows (cuFuncGetAttribute), which CUPTI's activity records,
//      kept for launches that ran, cannot say
//   {"mark": "LABEL"}   where the process called kw_inject_mark(LABEL): the
//      launches before it were recorded before it (a harness marks where
//      each case's launches begin and end)
//   {"module": {"format": "cubin"|"ptx"|"other", "image": SHA256,
//    "kernels": {"demangled name": SHA256}, "problem": "..."}}
//      a module the driver loaded: the digest of each kernel's machine code
//      (kw/common/module_digest.hpp), for the case fingerprints
//   {"maps": ["/path", ...]}   at a normal exit: the files the process mapped
//      executable (its executable, the libraries it loaded)
//   {"end": {"pid": P, "launches": N, "dropped": D}}   at a normal exit
//   {"error": "..."}   when tracing could not start
// A process that dies without exiting normally has no "end" line: its
// records of the last buffer (up to 8 MiB of them) may be missing.
//
//   {"paused": {"pid": P, "launches": N, "dropped": D}}   after
//      kw_inject_record(0), with the maps before it: the records up to here
//      are complete, as at an exit (a harness records one stage of many)
//
// KW_INJECT_LAUNCHES=0 records modules and maps only: a kwbench process
// traces its own launches through CUPTI's activity API, which has room for
// one client.
//
// It must never take the process down: every CUPTI call is checked, and a
// failure is written as an "error" line, not thrown.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <cuda.h>

// cupti.h (through it) declares each driver call's parameters too.
#include "cupti_kernel_record.hpp"
#include "kw/common/demangle.hpp"
#include "kw/common/module_digest.hpp"

namespace {

std::mutex g_mutex;
std::FILE* g_out = nullptr;
unsigned long long g_launches = 0;
bool g_trace_launches = true;  // KW_INJECT_LAUNCHES
bool g_recording = true;       // kw_inject_record
CUpti_SubscriberHandle g_subscriber = nullptr;

// One record, one line. Invalid UTF-8 (a path) is replaced, never thrown
// inside someone else's process.
void write_record(const nlohmann::json& record) {
  if (g_out == nullptr) return;
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::fputs(line.c_str(), g_out);
  std::fputc('\n', g_out);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kwbench::cupti::kBufferBytes));
  *size = *buffer == nullptr ? 0 : kwbench::cupti::kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::lock_guard lock(g_mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    const kwbench::cupti::KernelRecord* kernel = kwbench::cupti::kernel_of(record);
    if (kernel == nullptr) continue;
    ++g_launches;
    write_record({{"kernel", kw::common::demangle(kernel->name)},
                  {"grid", {kernel->gridX, kernel->gridY, kernel->gridZ}},
                  {"block", {kernel->blockX, kernel->blockY, kernel->blockZ}},
                  {"registers", kernel->registersPerThread},
                  {"static_smem", kernel->staticSharedMemory},
                  {"dynamic_smem", kernel->dynamicSharedMemory},
                  {"duration_ns", kernel->end - kernel->start}});
  }
  if (g_out != nullptr) std::fflush(g_out);
  std::free(buffer);
}

// -1 when the driver cannot say. The runtime's launches pass a CUkernel (a
// context-independent handle) where a CUfunction goes; the context's
// function of that kernel answers then.
int attribute(CUfunction function, CUfunction_attribute which) {
  int value = -1;
  if (cuFuncGetAttribute(&value, which, function) == CUDA_SUCCESS) return value;
  CUfunction in_context = nullptr;
  if (cuKernelGetFunction(&in_context, reinterpret_cast<CUkernel>(function)) == CUDA_SUCCESS &&
      cuFuncGetAttribute(&value, which, in_context) == CUDA_SUCCESS)
    return value;
  return -1;
}

// A module as the driver loaded it: each kernel's code digested (the image
// is valid only during the callback).
void on_module_loaded(const CUpti_ResourceData* resource) {
  {
    std::lock_guard lock(g_mutex);
    if (!g_recording) return;
  }
  const auto* module = static_cast<const CUpti_ModuleResourceData*>(resource->resourceDescriptor);
  if (module == nullptr || module->pCubin == nullptr) return;
  const kw::common::ModuleDigests digests =
      kw::common::module_digests(std::string_view(module->pCubin, module->cubinSize));
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [name, digest] : digests.kernels) kernels[kw::common::demangle(name.c_str())] = digest;
  nlohmann::json record{{"format", digests.format}, {"image", digests.image_digest}, {"kernels", kernels}};
  if (!digests.problem.empty()) record["problem"] = digests.problem;
  std::lock_guard lock(g_mutex);
  write_record({{"module", record}});
  if (g_out != nullptr) std::fflush(g_out);
}

// The files mapped executable: the process's code, and its libraries'.
nlohmann::json mapped_code() {
  std::set<std::string> files;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    if (perms.size() >= 3 && perms[2] == 'x' && path.starts_with("/")) files.insert(path);
  }
  return nlohmann::json(std::vector<std::string>(files.begin(), files.end()));
}

// A module loaded; or, at the exit of a launch call that failed, what was
// asked and what the kernel allows.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (id == CUPTI_CBID_RESOURCE_MODULE_LOADED)
      on_module_loaded(static_cast<const CUpti_ResourceData*>(data));
    return;
  }
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_EXIT || call->functionReturnValue == nullptr) return;
  const CUresult result = *static_cast<const CUresult*>(call->functionReturnValue);
  if (result == CUDA_SUCCESS) return;
  CUfunction function = nullptr;
  nlohmann::json grid, block;
  unsigned dynamic_smem = 0;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
    // The _ptsz variant's parameters have the same layout.
    const auto* p = static_cast<const cuLaunchKernel_params*>(call->functionParams);
    function = p->f;
    grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
    block = {p->blockDimX, p->blockDimY, p->blockDimZ};
    dynamic_smem = p->sharedMemBytes;
  } else {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(call->functionParams);
    if (p->config == nullptr) return;
    function = p->f;
    grid = {p->config->gridDimX, p->config->gridDimY, p->config->gridDimZ};
    block = {p->config->blockDimX, p->config->blockDimY, p->config->blockDimZ};
    dynamic_smem = p->config->sharedMemBytes;
  }
  const char* error = nullptr;
  if (cuGetErrorName(result, &error) != CUDA_SUCCESS || error == nullptr) error = "CUDA error";
  nlohmann::json refused{{"kernel", kw::common::demangle(call->symbolName)},
                         {"error", error},
                         {"grid", grid},
                         {"block", block},
                         {"dynamic_smem", dynamic_smem}};
  if (function != nullptr) {
    refused["static_smem"] = attribute(function, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    refused["max_dynamic_smem"] = attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    refused["max_threads_per_block"] = attribute(function, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    refused["registers"] = attribute(function, CU_FUNC_ATTRIBUTE_NUM_REGS);
  }
  std::lock_guard lock(g_mutex);
  write_record({{"failed_launch", refused}});
  if (g_out != nullptr) std::fflush(g_out);
}

void at_exit() {
  CUptiResult flushed = CUPTI_SUCCESS, counted = CUPTI_SUCCESS;
  size_t dropped = 0;
  if (g_trace_launches) {
    flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    counted = cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  }
  const nlohmann::json maps = mapped_code();
  std::lock_guard lock(g_mutex);
  if (flushed != CUPTI_SUCCESS)
    write_record({{"error", "cuptiActivityFlushAll: " + kwbench::cupti::result_text(flushed)}});
  if (counted != CUPTI_SUCCESS)
    write_record({{"error", "cuptiActivityGetNumDroppedRecords: " + kwbench::cupti::result_text(counted)}});
  write_record({{"maps", maps}});
  write_record({{"end", {{"pid", getpid()}, {"launches", g_launches}, {"dropped", dropped}}}});
  if (g_out != nullptr) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* dir = std::getenv("KW_INJECT_OUT");
  if (dir == nullptr || *dir == '\0') return 1;  // loaded, asked for nothing
  const std::string path = std::string(dir) + "/launches-" + std::to_string(getpid()) + ".jsonl";
  {
    std::lock_guard lock(g_mutex);
    g_out = std::fopen(path.c_str(), "a");
    if (g_out == nullptr) return 1;  // nowhere to say so; the agent sees no file
    char exe[4096] = {};
    const ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    write_record({{"start",
                   {{"pid", getpid()},
                    {"exe", length > 0 ? std::string(exe, static_cast<std::size_t>(length)) : ""}}}});
    std::fflush(g_out);
  }
  auto fail = [](const std::string& what) {
    std::lock_guard lock(g_mutex);
    write_record({{"error", what}});
    std::fflush(g_out);
    return 1;
  };
  if (std::string problem = kwbench::cupti::version_problem(); !problem.empty()) return fail(problem);
  const char* launches = std::getenv("KW_INJECT_LAUNCHES");
  g_trace_launches = launches == nullptr || std::string(launches) != "0";
  if (g_trace_launches) {
    if (CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        result != CUPTI_SUCCESS)
      return fail("cuptiActivityRegisterCallbacks: " + kwbench::cupti::result_text(result));
    if (CUptiResult result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        result != CUPTI_SUCCESS)
      return fail("cuptiActivityEnable(CONCURRENT_KERNEL): " + kwbench::cupti::result_text(result));
  }
  CUpti_SubscriberHandle subscriber = nullptr;
  if (CUptiResult result = cuptiSubscribe(&subscriber, on_callback, nullptr); result != CUPTI_SUCCESS)
    return fail("cuptiSubscribe: " + kwbench::cupti::result_text(result));
  g_subscriber = subscriber;
  if (CUptiResult result =
          cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
      result != CUPTI_SUCCESS)
    return fail("cuptiEnableCallback(module loaded): " + kwbench::cupti::result_text(result));
  if (!g_trace_launches) {
    std::atexit(at_exit);
    return 1;
  }
  for (CUpti_CallbackId id :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz}) {
    if (CUptiResult result = cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
        result != CUPTI_SUCCESS)
      return fail("cuptiEnableCallback(launch " + std::to_string(id) +
                  "): " + kwbench::cupti::result_text(result));
  }
  std::atexit(at_exit);
  return 1;
}

// Flushes every completed launch record, then writes {"mark": label}: a
// harness that synchronised its device first has all launches before the
// call on the lines before the mark. Returns 0, or -1 when nothing is
// recording (no KW_INJECT_OUT, or CUDA not initialised yet) or the flush
// failed (said in an "error" line).
extern "C" __attribute__((visibility("default"))) int kw_inject_mark(const char* label) {
  {
    std::lock_guard lock(g_mutex);
    if (g_out == nullptr || label == nullptr) return -1;
  }
  // Delivers the buffers through buffer_completed before it returns.
  const CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lock(g_mutex);
  if (g_out == nullptr) return -1;
  if (flushed != CUPTI_SUCCESS) {
    write_record({{"error", "cuptiActivityFlushAll at mark: " + kwbench::cupti::result_text(flushed)}});
    std::fflush(g_out);
    return -1;
  }
  write_record({{"mark", label}});
  std::fflush(g_out);
  return 0;
}

namespace {

constexpr CUpti_CallbackId kLaunchCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};

// Launch tracing on or off; an "error" line where CUPTI refused.
bool switch_launch_tracing(bool on) {
  std::string failed;
  if (!on) {
    // Delivers the launches traced so far through buffer_completed first.
    if (CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
      failed = "cuptiActivityFlushAll: " + kwbench::cupti::result_text(r);
  }
  for (CUpti_CallbackId id : kLaunchCallbacks) {
    if (CUptiResult r = cuptiEnableCallback(on ? 1 : 0, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
        r != CUPTI_SUCCESS && failed.empty())
      failed = "cuptiEnableCallback(launch " + std::to_string(id) + "): " + kwbench::cupti::result_text(r);
  }
  const CUptiResult r = on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
                           : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS && failed.empty())
    failed = std::string(on ? "cuptiActivityEnable" : "cuptiActivityDisable") +
             "(CONCURRENT_KERNEL): " + kwbench::cupti::result_text(r);
  if (failed.empty()) return true;
  std::lock_guard lock(g_mutex);
  write_record({{"error", failed}});
  if (g_out != nullptr) std::fflush(g_out);
  return false;
}

}  // namespace

// Records on (1) or off (0): off, the launches traced so far are written,
// then the maps and a "paused" line, and no launch or module is recorded
// until it is on again; a process whose records stop there reads as one
// that exited. Tracing costs each launch time, and a harness that times in
// the same process (kwbench.py's preflight) times without it. Returns 0, or
// -1 when nothing is recording (no KW_INJECT_OUT, or CUDA not initialised
// yet) or CUPTI refused (said in an "error" line).
extern "C" __attribute__((visibility("default"))) int kw_inject_record(int on) {
  {
    std::lock_guard lock(g_mutex);
    if (g_out == nullptr || g_subscriber == nullptr) return -1;
    if (g_recording == (on != 0)) return 0;
  }
  const bool switched = !g_trace_launches || switch_launch_tracing(on != 0);
  std::size_t dropped = 0;
  if (on == 0 && g_trace_launches && cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS)
    dropped = 0;
  const nlohmann::json maps = on == 0 ? mapped_code() : nlohmann::json();
  std::lock_guard lock(g_mutex);
  g_recording = on != 0;
  if (on == 0) {
    write_record({{"maps", maps}});
    write_record({{"paused", {{"pid", getpid()}, {"launches", g_launches}, {"dropped", dropped}}}});
  }
  std::fflush(g_out);
  return switched ? 0 : -1;
}
