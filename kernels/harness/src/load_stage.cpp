// The load stage (libraries, symbols and kernels of the registry) and the
// device the stages run on.
#include <dlfcn.h>

#include <algorithm>
#include <set>

#include "case_run.hpp"
#include "nvml.hpp"

namespace kwbench {

using namespace case_run;

json expected_launch_json(const ExpectedLaunch& expected) {
  json out{{"kernel_pattern", expected.kernel_pattern}, {"block", dim3_json(expected.block)}};
  if (expected.grid) out["grid"] = dim3_json(*expected.grid);
  if (expected.max_registers) out["max_registers"] = *expected.max_registers;
  if (expected.max_shared_bytes) out["max_shared_bytes"] = *expected.max_shared_bytes;
  return out;
}

DeviceFacts probe_device() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    throw Error(status == cudaSuccess ? "no CUDA device"
                                      : std::string("no CUDA device (") + cudaGetErrorName(status) + ")");
  }
  DeviceFacts facts;
  KW_CUDA_CHECK(cudaGetDevice(&facts.ordinal));
  cudaDeviceProp prop{};
  KW_CUDA_CHECK(cudaGetDeviceProperties(&prop, facts.ordinal));
  int sm_count = 0, l2 = 0, runtime = 0, driver = 0;
  KW_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, facts.ordinal));
  KW_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, facts.ordinal));
  KW_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  KW_CUDA_CHECK(cudaDriverGetVersion(&driver));
  char pci[32] = {};
  KW_CUDA_CHECK(cudaDeviceGetPCIBusId(pci, sizeof(pci), facts.ordinal));
  facts.pci_bus_id = pci;
  facts.l2_bytes = l2;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof(uuid),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  Nvml nvml(facts.pci_bus_id);
  std::string driver_text = nvml.driver_version();
  if (driver_text.empty())
    driver_text = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  facts.report = {
      {"name", prop.name},
      {"uuid", uuid},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"driver", driver_text},
      {"cuda_runtime", std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10)},
      {"memory_bytes", static_cast<std::int64_t>(prop.totalGlobalMem)},
      {"sm_count", sm_count},
      {"l2_bytes", l2}};
  return facts;
}

CaseOutcome run_load(const std::vector<LibraryInfo>& libraries, const DeviceFacts& device) {
  CaseOutcome outcome;
  json library_details = json::array(), kernel_details = json::array();
  std::vector<std::string> failures;
  for (const LibraryInfo& library : libraries) {
    void* handle = dlopen(library.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failures.push_back("dlopen(" + library.path + ", RTLD_NOW) failed: " + (why ? why : "unknown error"));
      library_details.push_back({{"path", library.path}, {"loaded", false}});
      continue;
    }
    json missing = json::array();
    for (const std::string& symbol : library.symbols) {
      dlerror();
      if (dlsym(handle, symbol.c_str()) == nullptr) {
        missing.push_back(symbol);
        failures.push_back(library.path + ": symbol " + symbol + " not found");
      }
    }
    library_details.push_back({{"path", library.path}, {"loaded", true}, {"missing_symbols", missing}});
  }

  int optin = 0, regs_per_block = 0, max_threads = 0;
  KW_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.ordinal));
  KW_CUDA_CHECK(cudaDeviceGetAttribute(&regs_per_block, cudaDevAttrMaxRegistersPerBlock, device.ordinal));
  KW_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerBlock, device.ordinal));
  std::string cc = device.report["compute_capability"];
  for (KernelInfo& kernel : Registry::instance().kernels()) {
    try {
      if (kernel.configure) kernel.configure();
    } catch (const std::exception& error) {
      failures.push_back("kernel " + kernel.name + ": configuring it failed: " + error.what());
      continue;
    }
    cudaFuncAttributes attr{};
    cudaError_t status = cudaFuncGetAttributes(&attr, kernel.function);
    if (status == cudaErrorNoKernelImageForDevice || status == cudaErrorInvalidDeviceFunction) {
      cudaGetLastError();
      failures.push_back("kernel " + kernel.name + ": no kernel image for this device (compute capability " +
                         cc + "); the build's -gencode targets do not cover it");
      continue;
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      failures.push_back("kernel " + kernel.name +
                         ": cudaFuncGetAttributes failed: " + cudaGetErrorString(status));
      continue;
    }
    auto static_smem = static_cast<std::int64_t>(attr.sharedSizeBytes);
    auto dynamic_smem = static_cast<std::int64_t>(kernel.dynamic_smem);
    kernel_details.push_back({{"name", kernel.name},
                              {"registers", attr.numRegs},
                              {"static_smem", static_smem},
                              {"dynamic_smem", dynamic_smem},
                              {"dynamic_smem_limit", attr.maxDynamicSharedSizeBytes},
                              {"local_bytes_per_thread", attr.localSizeBytes},
                              {"max_threads_per_block", attr.maxThreadsPerBlock},
                              {"block_threads", kernel.block_threads}});
    std::string prefix = "kernel " + kernel.name + ": ";
    if (static_smem + dynamic_smem > optin) {
      failures.push_back(prefix + "asks for " + kib(static_smem + dynamic_smem) + " of shared memory (" +
                         kib(static_smem) + " static + " + kib(dynamic_smem) +
                         " dynamic); this device allows " + kib(optin) + " per block");
    } else if (dynamic_smem > attr.maxDynamicSharedSizeBytes) {
      failures.push_back(
          prefix + "asks for " + kib(dynamic_smem) + " of dynamic shared memory but is allowed " +
          kib(attr.maxDynamicSharedSizeBytes) +
          " (raise it with cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize); this "
          "device allows up to " +
          kib(optin) + ")");
    }
    if (kernel.block_threads > attr.maxThreadsPerBlock) {
      failures.push_back(prefix + "launches " + std::to_string(kernel.block_threads) +
                         " threads per block but can run "
                         "at most " +
                         std::to_string(attr.maxThreadsPerBlock) + " here (" + std::to_string(attr.numRegs) +
                         " registers per thread, " + std::to_string(regs_per_block) +
                         " per block, device limit " + std::to_string(max_threads) + " threads)");
    }
  }
  outcome.details = {{"libraries", library_details}, {"kernels", kernel_details}};
  if (!failures.empty()) {
    outcome.status = "failed";
    std::string message;
    for (const std::string& failure : failures) message += (message.empty() ? "" : "; ") + failure;
    outcome.message = message;
  } else {
    outcome.message = std::to_string(libraries.size()) + " libraries and " +
                      std::to_string(Registry::instance().kernels().size()) +
                      " kernels load and fit this device";
  }
  return outcome;
}

}  // namespace kwbench
