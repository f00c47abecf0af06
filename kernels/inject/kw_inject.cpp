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
//   {"end": {"pid": P, "launches": N, "dropped": D}}   at a normal exit
//   {"error": "..."}   when tracing could not start
// A process that dies without exiting normally has no "end" line: its
// records of the last buffer (up to 8 MiB of them) may be missing.
//
// It must never take the process down: every CUPTI call is checked, and a
// failure is written as an "error" line, not thrown.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cupti_kernel_record.hpp"

namespace {

std::mutex g_mutex;
std::FILE* g_out = nullptr;
unsigned long long g_launches = 0;

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void write_line(const std::string& line) {
  if (g_out == nullptr) return;
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
    write_line("{\"kernel\": " + json_string(kwbench::cupti::demangle(kernel->name)) + ", \"grid\": [" +
               std::to_string(kernel->gridX) + ", " + std::to_string(kernel->gridY) + ", " +
               std::to_string(kernel->gridZ) + "], \"block\": [" + std::to_string(kernel->blockX) + ", " +
               std::to_string(kernel->blockY) + ", " + std::to_string(kernel->blockZ) +
               "], \"registers\": " + std::to_string(kernel->registersPerThread) +
               ", \"static_smem\": " + std::to_string(kernel->staticSharedMemory) +
               ", \"dynamic_smem\": " + std::to_string(kernel->dynamicSharedMemory) +
               ", \"duration_ns\": " + std::to_string(kernel->end - kernel->start) + "}");
  }
  if (g_out != nullptr) std::fflush(g_out);
  std::free(buffer);
}

void at_exit() {
  CUptiResult flushed = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t dropped = 0;
  CUptiResult counted = cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  std::lock_guard lock(g_mutex);
  if (flushed != CUPTI_SUCCESS)
    write_line(
        "{\"error\": " + json_string("cuptiActivityFlushAll: " + kwbench::cupti::result_text(flushed)) + "}");
  if (counted != CUPTI_SUCCESS) {
    write_line("{\"error\": " +
               json_string("cuptiActivityGetNumDroppedRecords: " + kwbench::cupti::result_text(counted)) +
               "}");
  }
  write_line("{\"end\": {\"pid\": " + std::to_string(getpid()) + ", \"launches\": " +
             std::to_string(g_launches) + ", \"dropped\": " + std::to_string(dropped) + "}}");
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
    write_line("{\"start\": {\"pid\": " + std::to_string(getpid()) + ", \"exe\": " +
               json_string(length > 0 ? std::string(exe, static_cast<std::size_t>(length)) : "") + "}}");
    std::fflush(g_out);
  }
  auto fail = [](const std::string& what) {
    std::lock_guard lock(g_mutex);
    write_line("{\"error\": " + json_string(what) + "}");
    std::fflush(g_out);
    return 1;
  };
  if (std::string problem = kwbench::cupti::version_problem(); !problem.empty()) return fail(problem);
  if (CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
      result != CUPTI_SUCCESS)
    return fail("cuptiActivityRegisterCallbacks: " + kwbench::cupti::result_text(result));
  if (CUptiResult result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      result != CUPTI_SUCCESS)
    return fail("cuptiActivityEnable(CONCURRENT_KERNEL): " + kwbench::cupti::result_text(result));
  std::atexit(at_exit);
  return 1;
}
