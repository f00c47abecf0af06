#include "host/gpu_health.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "host/gpu_info.hpp"
#include "kw/common/nvml.hpp"
#include "kw/common/subprocess.hpp"

namespace kw::agent {

namespace {

using nlohmann::json;

// A kernel that only reads the SM clock counter until it has counted
// `cycles`: it loads every SM without drawing power, so the clock it runs
// at is what the GPU offers, not what a power cap leaves. PTX, JIT-compiled
// by the driver for whatever GPU this is.
constexpr const char* kSpinPtx = R"ptx(
.version 7.0
.target sm_70
.address_size 64

.visible .entry kw_spin(.param .u64 kw_spin_cycles)
{
  .reg .pred %p;
  .reg .u64 %start, %now, %target;
  ld.param.u64 %target, [kw_spin_cycles];
  mov.u64 %start, %clock64;
SPIN:
  mov.u64 %now, %clock64;
  sub.u64 %now, %now, %start;
  setp.lt.u64 %p, %now, %target;
  @%p bra SPIN;
  ret;
}
)ptx";

// The reasons a clock that fell short is reported with (NVML's clocks event
// reasons; the same bits kernels/harness marks throttled samples by).
std::string reasons_text(unsigned long long mask) {
  static const std::pair<unsigned long long, const char*> kNames[] = {
      {0x2, "applications clocks setting"}, {0x4, "software power cap"},         {0x8, "hardware slowdown"},
      {0x20, "software thermal slowdown"},  {0x40, "hardware thermal slowdown"}, {0x80, "power brake"}};
  std::string text;
  for (const auto& [bit, name] : kNames) {
    if ((mask & bit) == 0) continue;
    text += (text.empty() ? "" : ", ") + std::string(name);
  }
  return text.empty() ? "none reported" : text;
}

template <typename F>
F symbol(void* library, const char* name) {
  return library == nullptr ? nullptr : reinterpret_cast<F>(dlsym(library, name));
}

// NVML, opened for one GPU by UUID.
class NvmlDevice {
 public:
  explicit NvmlDevice(const std::string& uuid) { device_ = nvml_.device_by_uuid(uuid, why_); }

  bool available() const { return device_ != nullptr; }
  const std::string& unavailable() const { return why_; }
  std::string error(int status) const { return nvml_.error(status); }
  // NVML_SUCCESS is 0; common::Nvml::kNotSupported where the GPU or the
  // driver lacks the call.
  template <typename... Args>
  int call(const char* name, Args... args) const {
    return nvml_.call(device_, name, args...);
  }
  std::optional<unsigned> sm_clock() const {
    unsigned mhz = 0;
    return call("nvmlDeviceGetClockInfo", 1 /* NVML_CLOCK_SM */, &mhz) == 0 ? std::optional(mhz)
                                                                            : std::nullopt;
  }
  unsigned long long event_reasons() const {
    unsigned long long mask = 0;
    if (call("nvmlDeviceGetCurrentClocksEventReasons", &mask) != 0)
      call("nvmlDeviceGetCurrentClocksThrottleReasons", &mask);
    return mask;
  }

 private:
  common::Nvml nvml_;
  void* device_ = nullptr;
  std::string why_;
};

GpuCheck ecc_check(const NvmlDevice& nvml) {
  GpuCheck check{"ecc", true, ""};
  if (!nvml.available()) {
    check.message = "not checked: " + nvml.unavailable();
    return check;
  }
  int current = 0, pending = 0;
  const int mode = nvml.call("nvmlDeviceGetEccMode", &current, &pending);
  if (mode == common::Nvml::kNotSupported) {
    check.message = "not checked: this GPU has no ECC";
    return check;
  }
  if (mode != 0) {
    check.passed = false;
    check.message = "NVML cannot read the ECC mode: " + nvml.error(mode);
    return check;
  }
  if (current == 0) {
    check.message = "ECC is off";
    return check;
  }
  unsigned long long uncorrected = 0;
  if (int status =
          nvml.call("nvmlDeviceGetTotalEccErrors", 1 /* uncorrected */, 0 /* volatile */, &uncorrected);
      status != 0) {
    check.passed = false;
    check.message = "NVML cannot read the ECC error count: " + nvml.error(status);
    return check;
  }
  unsigned corrected_rows = 0, uncorrected_rows = 0, remap_pending = 0, remap_failed = 0;
  const int rows = nvml.call("nvmlDeviceGetRemappedRows", &corrected_rows, &uncorrected_rows, &remap_pending,
                             &remap_failed);
  std::vector<std::string> faults;
  if (uncorrected > 0)
    faults.push_back(std::to_string(uncorrected) + " uncorrected ECC error(s) since the driver loaded");
  if (rows == 0 && remap_pending != 0)
    faults.emplace_back("a memory row remap is pending (the GPU needs a reset)");
  if (rows == 0 && remap_failed != 0) faults.emplace_back("a memory row remap failed");
  if (!faults.empty()) {
    check.passed = false;
    for (const std::string& fault : faults) check.message += (check.message.empty() ? "" : "; ") + fault;
    return check;
  }
  check.message = "no uncorrected ECC error since the driver loaded";
  if (rows == 0)
    check.message += ", " + std::to_string(corrected_rows + uncorrected_rows) + " row(s) remapped";
  return check;
}

// The CUDA driver API through dlopen, its types as plain ints and pointers.
struct CudaDriver {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int (*init)(unsigned) = symbol<int (*)(unsigned)>(library, "cuInit");
  int (*count)(int*) = symbol<int (*)(int*)>(library, "cuDeviceGetCount");
  int (*get)(int*, int) = symbol<int (*)(int*, int)>(library, "cuDeviceGet");
  int (*uuid)(unsigned char*, int) = symbol<int (*)(unsigned char*, int)>(library, "cuDeviceGetUuid_v2");
  int (*retain)(void**, int) = symbol<int (*)(void**, int)>(library, "cuDevicePrimaryCtxRetain");
  int (*set_current)(void*) = symbol<int (*)(void*)>(library, "cuCtxSetCurrent");
  int (*load)(void**, const void*) = symbol<int (*)(void**, const void*)>(library, "cuModuleLoadData");
  int (*function)(void**, void*,
                  const char*) = symbol<int (*)(void**, void*, const char*)>(library, "cuModuleGetFunction");
  int (*attribute)(int*, int, int) = symbol<int (*)(int*, int, int)>(library, "cuDeviceGetAttribute");
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = symbol<int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, void*, void**, void**)>(library, "cuLaunchKernel");
  int (*query)(void*) = symbol<int (*)(void*)>(library, "cuStreamQuery");
  int (*synchronize)() = symbol<int (*)()>(library, "cuCtxSynchronize");
  int (*error_name)(int, const char**) = symbol<int (*)(int, const char**)>(library, "cuGetErrorName");

  bool loaded() const {
    return init && count && get && uuid && retain && set_current && load && function && attribute && launch &&
           query && synchronize && error_name;
  }
  // Throws naming the call and the driver's error.
  void check(int status, const char* call) const {
    if (status == 0) return;
    const char* name = nullptr;
    std::string text = error_name(status, &name) == 0 && name != nullptr ? name : std::to_string(status);
    throw std::runtime_error(std::string(call) + " failed: " + text);
  }
};

std::string uuid_text(const unsigned char* bytes) {
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", bytes[0],
                bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]);
  return text;
}

// The spin kernel loaded in a context on the one GPU CUDA sees, which must be `uuid`.
struct SpinKernel {
  void* function = nullptr;
  int sms = 0;
};

SpinKernel load_spin(const CudaDriver& cuda, const std::string& uuid) {
  if (cuda.library == nullptr) throw std::runtime_error("no CUDA driver (libcuda.so.1)");
  if (!cuda.loaded()) throw std::runtime_error("the CUDA driver lacks the calls this check needs");
  cuda.check(cuda.init(0), "cuInit");
  int devices = 0;
  cuda.check(cuda.count(&devices), "cuDeviceGetCount");
  if (devices == 0) throw std::runtime_error("CUDA sees no device (CUDA_VISIBLE_DEVICES=" + uuid + ")");
  int device = 0;
  cuda.check(cuda.get(&device, 0), "cuDeviceGet");
  unsigned char id[16] = {};
  cuda.check(cuda.uuid(id, device), "cuDeviceGetUuid");
  if (uuid_text(id) != uuid)
    throw std::runtime_error("CUDA's device 0 is " + uuid_text(id) + ", not " + uuid +
                             " (CUDA_VISIBLE_DEVICES)");
  void* ctx = nullptr;
  cuda.check(cuda.retain(&ctx, device), "cuDevicePrimaryCtxRetain");
  cuda.check(cuda.set_current(ctx), "cuCtxSetCurrent");
  void* module = nullptr;
  cuda.check(cuda.load(&module, kSpinPtx), "cuModuleLoadData");
  SpinKernel spin;
  cuda.check(cuda.function(&spin.function, module, "kw_spin"), "cuModuleGetFunction");
  cuda.check(cuda.attribute(&spin.sms, 16 /* multiprocessor count */, device), "cuDeviceGetAttribute");
  return spin;
}

// What NVML saw of the SM clock while the spin kernels ran.
struct ClockUnderLoad {
  int app_status = common::Nvml::kNotSupported;  // of reading the application clock
  unsigned app_mhz = 0;
  unsigned peak = 0;
  unsigned long long reasons = 0;  // the clock event reasons while it was below 95% of app_mhz
  int launches = 0;
};

// Launches of ~20 ms each (at the application clock, or 2 GHz), queued at
// once; the clock is read while they run.
ClockUnderLoad run_spin(const CudaDriver& cuda, const NvmlDevice& nvml, const SpinKernel& spin,
                        double load_seconds) {
  ClockUnderLoad seen;
  if (nvml.available())
    seen.app_status = nvml.call("nvmlDeviceGetApplicationsClock", 1 /* SM */, &seen.app_mhz);
  const double mhz = seen.app_status == 0 && seen.app_mhz > 0 ? seen.app_mhz : 2000.0;
  unsigned long long cycles = static_cast<unsigned long long>(0.02 * mhz * 1e6);
  void* params[] = {&cycles};
  seen.launches = std::max(1, static_cast<int>(load_seconds / 0.02));
  for (int i = 0; i < seen.launches; ++i)
    cuda.check(cuda.launch(spin.function, static_cast<unsigned>(spin.sms) * 4, 1, 1, 128, 1, 1, 0, nullptr,
                           params, nullptr),
               "cuLaunchKernel");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(10 + 4 * load_seconds);
  int status = 0;
  while ((status = cuda.query(nullptr)) == 600 /* CUDA_ERROR_NOT_READY */) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("a " + std::to_string(load_seconds) + " s kernel had not finished after " +
                               std::to_string(static_cast<int>(10 + 4 * load_seconds)) + " s");
    if (nvml.available()) {
      if (auto now = nvml.sm_clock()) {
        if (*now > seen.peak) seen.peak = *now;
        if (seen.app_status == 0 && *now < 0.95 * seen.app_mhz) seen.reasons |= nvml.event_reasons();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  cuda.check(status, "cuStreamQuery");
  cuda.check(cuda.synchronize(), "cuCtxSynchronize");
  return seen;
}

GpuCheck clock_check(const NvmlDevice& nvml, const ClockUnderLoad& seen) {
  if (!nvml.available()) return {"clocks", true, "not checked: " + nvml.unavailable()};
  if (seen.app_status != 0)
    return {"clocks", true,
            "not checked: NVML reads no application clock (" + nvml.error(seen.app_status) +
                "); peak SM clock " + std::to_string(seen.peak) + " MHz"};
  if (seen.peak >= 0.95 * seen.app_mhz)
    return {"clocks", true,
            "SM clock reached " + std::to_string(seen.peak) + " MHz under load, application clock " +
                std::to_string(seen.app_mhz) + " MHz"};
  return {"clocks", false,
          "SM clock reached only " + std::to_string(seen.peak) + " MHz under load, application clock " +
              std::to_string(seen.app_mhz) + " MHz; clock event reasons: " + reasons_text(seen.reasons)};
}

// The context check and, while its kernel runs, the clock check.
std::pair<GpuCheck, GpuCheck> context_and_clock_checks(const std::string& uuid, const NvmlDevice& nvml,
                                                       double load_seconds) {
  GpuCheck context{"cuda_context", false, ""}, clocks{"clocks", false, "not checked: no CUDA context"};
  // Never unloaded: after cuInit the driver is not safe to unload.
  static const CudaDriver cuda;
  try {
    const SpinKernel spin = load_spin(cuda, uuid);
    const ClockUnderLoad seen = run_spin(cuda, nvml, spin, load_seconds);
    context = {"cuda_context", true,
               "a context on " + uuid + " ran " + std::to_string(seen.launches) + " kernel launches on " +
                   std::to_string(spin.sms) + " SMs"};
    clocks = clock_check(nvml, seen);
  } catch (const std::exception& error) {
    context.message = error.what();
  }
  return {context, clocks};
}

}  // namespace

json last_line_json(std::string output) {
  while (!output.empty() && output.back() == '\n') output.pop_back();
  const auto newline = output.rfind('\n');
  return json::parse(newline == std::string::npos ? output : output.substr(newline + 1));
}

bool GpuHealth::healthy() const {
  return !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const GpuCheck& c) { return c.passed; });
}

std::string GpuHealth::failures() const {
  std::string text;
  for (const GpuCheck& check : checks) {
    if (!check.passed) text += (text.empty() ? "" : "; ") + check.name + ": " + check.message;
  }
  return checks.empty() ? "no check ran" : text;
}

json GpuHealth::to_json() const {
  json out{
      {"uuid", uuid}, {"index", index}, {"model", model}, {"healthy", healthy()}, {"checks", json::array()}};
  for (const GpuCheck& check : checks)
    out["checks"].push_back({{"name", check.name}, {"passed", check.passed}, {"message", check.message}});
  return out;
}

GpuHealth GpuHealth::from_json(const json& value) {
  auto need = [&](const json& object, const char* key, json::value_t type,
                  const std::string& at) -> const json& {
    if (!object.is_object() || !object.contains(key) || object[key].type() != type)
      throw std::runtime_error(at + key + ": missing or of the wrong type");
    return object[key];
  };
  GpuHealth health;
  health.uuid = need(value, "uuid", json::value_t::string, "").get<std::string>();
  const json& index = value.value("index", json(-1));
  if (!index.is_number_integer()) throw std::runtime_error("index: must be an integer");
  health.index = index.get<int>();
  health.model = value.value("model", std::string());
  const json& checks = need(value, "checks", json::value_t::array, "");
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const std::string at = "checks[" + std::to_string(i) + "].";
    health.checks.push_back({need(checks[i], "name", json::value_t::string, at).get<std::string>(),
                             need(checks[i], "passed", json::value_t::boolean, at).get<bool>(),
                             checks[i].value("message", std::string())});
  }
  return health;
}

GpuHealth check_pinned_gpu(const std::string& uuid, int index, const std::string& model,
                           double load_seconds) {
  GpuHealth health{uuid, index, model, {}};
  NvmlDevice nvml(uuid);
  auto [context, clocks] = context_and_clock_checks(uuid, nvml, load_seconds);
  health.checks = {context, clocks, ecc_check(nvml)};
  return health;
}

GpuHealth check_gpu_in_child(const std::string& uuid, int index, const std::string& model,
                             const std::string& command) {
  common::ChildSpec spec;
  if (command.empty()) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    spec.argv = {ec ? std::string("kw") : self.string(), "gpu-check", "--gpu", uuid, "--json"};
  } else {
    spec = common::shell(command, std::filesystem::current_path(), 120);
  }
  spec.env = {{"KW_GPU_UUID", uuid}, {"KW_GPU_INDEX", std::to_string(index)}};
  spec.timeout_s = 120;
  common::ChildOutcome outcome = common::run_child(spec);
  try {
    json parsed = last_line_json(outcome.output_tail);
    if (parsed.is_array() && parsed.size() == 1) parsed = parsed[0];
    GpuHealth health = GpuHealth::from_json(parsed);
    if (health.uuid != uuid) throw std::runtime_error("it checked " + health.uuid + ", not " + uuid);
    if (health.index < 0) health.index = index;
    if (health.model.empty()) health.model = model;
    return health;
  } catch (const std::exception& error) {
    GpuHealth failed{uuid, index, model, {}};
    failed.checks.push_back({"health_check", false,
                             "the health check (" +
                                 (command.empty() ? std::string("kw gpu-check") : command) + ") " +
                                 outcome.describe() + " and gave no result: " + error.what()});
    return failed;
  }
}

}  // namespace kw::agent
