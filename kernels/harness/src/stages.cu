#include "stages.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "clock_probe.hpp"
#include "kernel_trace.hpp"
#include "kw/common/stats.hpp"
#include "nvml.hpp"

namespace kwbench {

namespace {

using nlohmann::json;

json dim3_json(const Dim3& d) {
  return json::array({d.x, d.y, d.z});
}
std::string dim3_text(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string kib(std::int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buffer;
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

// Three significant digits, whatever the size: a kernel 230x slower than
// its baseline runs at 0.00435x of it, not "0.00x".
std::string speedup_text(double speedup) {
  return format("%.3g", speedup) + "x";
}

std::string range_text(const SanityRange& range) {
  const bool low = range.min_speedup > 0, high = range.max_speedup < 1e9;
  if (low && high) return speedup_text(range.min_speedup) + ".." + speedup_text(range.max_speedup);
  if (low) return "at least " + speedup_text(range.min_speedup);
  if (high) return "at most " + speedup_text(range.max_speedup);
  return "unbounded";
}

// A stream and state for one case, set up with fresh seeded inputs.
// Torn down in reverse: the case's handles while its stream lives, then its
// allocations, then the stream.
struct Prepared {
  Case& c;
  cudaStream_t stream = nullptr;
  std::unique_ptr<State> state;

  Prepared(Case& the_case, const BenchOptions& options) : c(the_case) {
    KW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    state = std::make_unique<State>(stream, options.seed ^ std::hash<std::string>{}(c.name()), options.impls);
    try {
      c.setup(*state);
      KW_CUDA_CHECK(cudaStreamSynchronize(stream));
    } catch (...) {
      release();
      throw;
    }
  }
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() { release(); }

 private:
  void release() {
    if (state) {
      cudaStreamSynchronize(stream);  // teardown: an error here has nowhere to go
      try {
        c.teardown(*state);
      } catch (...) {
      }
    }
    state.reset();
    if (stream) cudaStreamDestroy(stream);
    stream = nullptr;
  }
};

struct EventTimer {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventTimer() {
    KW_CUDA_CHECK(cudaEventCreate(&start));
    KW_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventTimer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <typename Fn>
  double time_ns(cudaStream_t stream, Fn&& fn) {
    KW_CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    KW_CUDA_CHECK(cudaEventRecord(stop, stream));
    KW_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    KW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) * 1e6;
  }
};

// Start and stop events for the rounds of one batch, each implementation's
// own, recorded while the batch is queued and read once it has finished.
class EventBatch {
 public:
  explicit EventBatch(std::size_t impls) : impls_(impls) {}
  ~EventBatch() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  EventBatch(const EventBatch&) = delete;
  EventBatch& operator=(const EventBatch&) = delete;
  void reserve(int rounds) {
    while (events_.size() < 2 * impls_ * static_cast<std::size_t>(rounds)) {
      cudaEvent_t event = nullptr;
      KW_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
  }
  void start(int round, std::size_t impl, cudaStream_t stream) {
    KW_CUDA_CHECK(cudaEventRecord(events_.at(index(round, impl)), stream));
  }
  void stop(int round, std::size_t impl, cudaStream_t stream) {
    KW_CUDA_CHECK(cudaEventRecord(events_.at(index(round, impl) + 1), stream));
  }
  double elapsed_ns(int round, std::size_t impl) const {
    float ms = 0;
    KW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[index(round, impl)], events_[index(round, impl) + 1]));
    return static_cast<double>(ms) * 1e6;
  }

 private:
  std::size_t index(int round, std::size_t impl) const {
    return 2 * (static_cast<std::size_t>(round) * impls_ + impl);
  }
  std::size_t impls_;
  std::vector<cudaEvent_t> events_;
};

// Queued work per batch of timed rounds, and a bound on the events it holds.
constexpr double kBatchSeconds = 0.01;
constexpr int kMaxBatchRounds = 256;
// Warm-up: the batch-to-batch change of time per round that counts as settled.
constexpr double kSettledSpread = 0.02;

// The implementations of a case that can run here: candidate first.
struct Impl {
  std::string name;
  std::string baseline;  // empty for the candidate
};

std::vector<Impl> runnable_impls(Case& c, json& skipped, const std::string& timed = "*") {
  std::vector<Impl> impls;
  if (glob_match(timed, "candidate")) impls.push_back({"candidate", ""});
  for (const std::string& baseline : c.baselines()) {
    if (!glob_match(timed, "baseline:" + baseline)) continue;
    std::string why = c.baseline_unavailable(baseline);
    if (why.empty()) {
      impls.push_back({"baseline:" + baseline, baseline});
    } else {
      skipped["baseline:" + baseline] = why;
    }
  }
  return impls;
}

void run_impl(Case& c, const Impl& impl, State& state) {
  if (impl.baseline.empty()) {
    c.run_candidate(state);
  } else {
    c.run_baseline(impl.baseline, state);
  }
}

json case_header(Case& c) {
  return {{"name", c.name()}, {"params", c.params()}};
}

}  // namespace

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

namespace {

// The per-case stages on a case already set up: one setup serves every
// stage of the preflight.
CaseOutcome launch_geometry_of(Prepared& prepared) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  ExpectedLaunch expected = c.expected_launch();
  outcome.part["expected_launch"] = expected_launch_json(expected);
  std::vector<ObservedLaunch> launches;
  {
    KernelTrace trace;
    c.run_candidate(*prepared.state);
    launches = trace.collect();
  }
  json observed = json::array();
  std::vector<std::string> problems;
  bool matched = false;
  std::string seen;
  for (const ObservedLaunch& launch : launches) {
    observed.push_back({{"kernel", launch.kernel},
                        {"grid", dim3_json(launch.grid)},
                        {"block", dim3_json(launch.block)},
                        {"registers", launch.registers},
                        {"static_smem", launch.static_smem},
                        {"dynamic_smem", launch.dynamic_smem},
                        {"duration_ns", launch.duration_ns}});
    seen += (seen.empty() ? "" : ", ") + launch.kernel + " block" + dim3_text(launch.block) + " grid" +
            dim3_text(launch.grid);
    if (!glob_match(expected.kernel_pattern, launch.kernel)) continue;
    matched = true;
    if (!(launch.block == expected.block)) {
      problems.push_back("block: expected " + dim3_text(expected.block) + ", observed " +
                         dim3_text(launch.block) + " (" + launch.kernel + ")");
    }
    if (expected.grid && !(launch.grid == *expected.grid)) {
      problems.push_back("grid: expected " + dim3_text(*expected.grid) + ", observed " +
                         dim3_text(launch.grid));
    }
    if (expected.max_registers && launch.registers > *expected.max_registers) {
      problems.push_back("registers: at most " + std::to_string(*expected.max_registers) +
                         " expected, observed " + std::to_string(launch.registers));
    }
    if (expected.max_shared_bytes && launch.static_smem + launch.dynamic_smem > *expected.max_shared_bytes) {
      problems.push_back("shared memory: at most " + kib(*expected.max_shared_bytes) +
                         " expected, observed " + kib(launch.static_smem + launch.dynamic_smem));
    }
  }
  outcome.part["launches"] = observed;
  if (!matched) {
    outcome.status = "failed";
    outcome.message = "no launch of a kernel matching \"" + expected.kernel_pattern +
                      "\"; observed: " + (seen.empty() ? "no kernel launches" : seen);
  } else if (!problems.empty()) {
    outcome.status = "failed";
    for (const std::string& problem : problems)
      outcome.message += (outcome.message.empty() ? "" : "; ") + problem;
  } else {
    outcome.message = std::to_string(launches.size()) + " launch(es), geometry as declared";
  }
  return outcome;
}

CaseOutcome correctness_of(Prepared& prepared) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  c.poison_output(*prepared.state);
  c.run_candidate(*prepared.state);
  KW_CUDA_CHECK(cudaStreamSynchronize(prepared.stream));
  Accuracy accuracy = c.check(*prepared.state);
  double tolerance = c.tolerance();
  bool finite = std::isfinite(accuracy.rel_l2_err) && std::isfinite(accuracy.max_abs_err);
  bool passed = accuracy.nonfinite == 0 && finite && accuracy.rel_l2_err <= tolerance;
  outcome.details["reference"] = accuracy.reference_from_cache ? "cached" : "computed";
  outcome.part["correctness"] = {{"passed", passed},
                                 {"rel_l2_err", finite ? accuracy.rel_l2_err : 0.0},
                                 {"max_abs_err", finite ? accuracy.max_abs_err : 0.0},
                                 {"tolerance", tolerance},
                                 {"nonfinite", accuracy.nonfinite}};
  if (accuracy.nonfinite > 0) {
    outcome.status = "failed";
    outcome.message = std::to_string(accuracy.nonfinite) +
                      " output values are NaN/Inf (unwritten outputs keep the NaN poison)";
  } else if (!passed) {
    outcome.status = "failed";
    outcome.message = "relative L2 error " + format("%.3g", accuracy.rel_l2_err) + " exceeds the tolerance " +
                      format("%.3g", tolerance) + " (max abs error " + format("%.3g", accuracy.max_abs_err) +
                      ")";
  } else {
    outcome.message = "rel L2 " + format("%.3g", accuracy.rel_l2_err) + " <= " + format("%.3g", tolerance);
  }
  return outcome;
}

CaseOutcome quick_bench_of(Prepared& prepared, const BenchOptions& options) {
  Case& c = prepared.c;
  CaseOutcome outcome;
  outcome.part = case_header(c);
  json skipped = json::object();
  std::vector<Impl> impls = runnable_impls(c, skipped);
  EventTimer timer;
  std::vector<std::vector<double>> samples(impls.size());
  for (const Impl& impl : impls) run_impl(c, impl, *prepared.state);  // warm-up
  KW_CUDA_CHECK(cudaStreamSynchronize(prepared.stream));
  for (int i = 0; i < options.quick_iterations; ++i) {
    for (std::size_t k = 0; k < impls.size(); ++k) {
      samples[k].push_back(timer.time_ns(prepared.stream, [&] { run_impl(c, impls[k], *prepared.state); }));
    }
  }
  json medians = json::object();
  for (std::size_t k = 0; k < impls.size(); ++k) medians[impls[k].name] = kw::common::median(samples[k]);
  outcome.details = {{"median_ns", medians}, {"skipped_baselines", skipped}};
  SanityRange range = c.sanity();
  double candidate = medians["candidate"];
  if (range.max_ns > 0 && candidate > range.max_ns) {
    outcome.status = "failed";
    outcome.message = "candidate median " + format("%.1f", candidate / 1000) +
                      " us exceeds the sanity bound " + format("%.1f", range.max_ns / 1000) + " us";
    return outcome;
  }
  if (!range.versus.empty()) {
    std::string versus = "baseline:" + range.versus;
    if (!medians.contains(versus)) {
      outcome.message = "sanity range vs " + versus + " not checked: " +
                        (skipped.contains(versus) ? skipped[versus].get<std::string>() : "no such baseline");
      return outcome;
    }
    double speedup = medians[versus].get<double>() / candidate;
    outcome.details["speedup"] = speedup;
    if (range.bounded && (speedup < range.min_speedup || speedup > range.max_speedup)) {
      outcome.status = "failed";
      outcome.message = "candidate runs at " + speedup_text(speedup) + " of " + versus + " (median " +
                        format("%.1f", candidate / 1000) + " us vs " +
                        format("%.1f", medians[versus].get<double>() / 1000) + " us); its sanity range is " +
                        range_text(range);
      return outcome;
    }
    outcome.message = speedup_text(speedup) + " of " + versus + ", " +
                      (range.bounded ? "inside " + range_text(range) : std::string("no bound set"));
    return outcome;
  }
  outcome.message = "median " + format("%.1f", candidate / 1000) + " us";
  return outcome;
}

CaseOutcome failed_outcome(Case& c, const std::string& message) {
  CaseOutcome outcome;
  outcome.status = "failed";
  outcome.message = message;
  outcome.part = case_header(c);
  return outcome;
}

}  // namespace

CaseOutcome run_launch_geometry(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return launch_geometry_of(prepared);
}

CaseOutcome run_correctness(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return correctness_of(prepared);
}

CaseOutcome run_quick_bench(Case& c, const DeviceFacts&, const BenchOptions& options) {
  Prepared prepared(c, options);
  return quick_bench_of(prepared, options);
}

void run_preflight(Case& c, const BenchOptions& options, std::size_t stages,
                   const std::function<void(std::size_t)>& on_start,
                   const std::function<void(std::size_t, const CaseOutcome&)>& on_result) {
  stages = std::min(stages, kPreflightCaseStages.size());
  if (!c.timed()) stages = std::min<std::size_t>(stages, 2);  // no quick_bench
  if (stages == 0) return;
  on_start(0);
  std::unique_ptr<Prepared> prepared;
  try {
    prepared = std::make_unique<Prepared>(c, options);
  } catch (const std::exception& error) {
    on_result(0, failed_outcome(c, std::string("setup: ") + error.what()));
    return;
  }
  for (std::size_t stage = 0; stage < stages; ++stage) {
    if (stage > 0) on_start(stage);
    CaseOutcome outcome;
    try {
      outcome = stage == 0   ? launch_geometry_of(*prepared)
                : stage == 1 ? correctness_of(*prepared)
                             : quick_bench_of(*prepared, options);
    } catch (const std::exception& error) {
      outcome = failed_outcome(c, error.what());
    }
    on_result(stage, outcome);
    if (outcome.status == "failed") return;  // its later stages are skipped for every case
  }
}

// Energy per iteration of each implementation. NVML's energy counter steps
// about every 100 ms on an H100 (docs/PERFORMANCE.md), and one read takes
// about 4 ms, so the window runs from one step to the first step at least
// options.energy_seconds later, the joules between two steps being whole.
// The implementation runs back to back all along (no L2 flush), the host
// keeping ~20 ms of batches queued while it polls the counter; an event
// after each ~1 ms batch tells how many iterations had finished when a step
// was seen. The counter is the board's, idle power included: a kernel's
// joules are its average power times its time. Each implementation gets its
// joules per iteration, average power and iterations, or nothing where NVML
// cannot read energy or the counter did not step (never a zero).
std::vector<json> measure_energy(Case& c, const std::vector<Impl>& impls, Prepared& prepared,
                                 const std::vector<std::vector<double>>& samples, Nvml& nvml,
                                 const BenchOptions& options) {
  std::vector<json> energy(impls.size(), json::object());
  if (!(options.energy_seconds > 0)) return energy;
  constexpr double kBatch = 0.001, kQueued = 0.02, kStepWait = 1.0;
  using Clock = std::chrono::steady_clock;
  for (std::size_t k = 0; k < impls.size(); ++k) {
    const double per_iteration_s = std::max(kw::common::median(samples[k]) * 1e-9, 1e-7);
    const std::int64_t batch =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(kBatch / per_iteration_s), 1, 4096);
    const std::int64_t queued_limit =
        std::max<std::int64_t>(2 * batch, static_cast<std::int64_t>(kQueued / per_iteration_s));
    struct Mark {
      cudaEvent_t event;
      std::int64_t iterations;  // finished once the event has
    };
    std::deque<Mark> marks;
    std::vector<cudaEvent_t> spare;
    std::int64_t enqueued = 0, finished = 0;
    auto poll = [&] {
      while (!marks.empty()) {
        cudaError_t status = cudaEventQuery(marks.front().event);
        if (status == cudaErrorNotReady) break;
        KW_CUDA_CHECK(status);
        finished = marks.front().iterations;
        spare.push_back(marks.front().event);
        marks.pop_front();
      }
    };
    auto top_up = [&] {
      poll();
      while (enqueued - finished < queued_limit) {
        for (std::int64_t i = 0; i < batch; ++i) run_impl(c, impls[k], *prepared.state);
        enqueued += batch;
        cudaEvent_t event = nullptr;
        if (spare.empty()) {
          KW_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
        } else {
          event = spare.back();
          spare.pop_back();
        }
        KW_CUDA_CHECK(cudaEventRecord(event, prepared.stream));
        marks.push_back({event, enqueued});
      }
    };
    // Polls the counter with the GPU kept busy until it steps past `from`
    // (at least `after` seconds from `since`), or kStepWait passes.
    struct Step {
      std::uint64_t millijoules;
      std::int64_t iterations;
      Clock::time_point at;
    };
    auto next_step = [&](std::uint64_t from, Clock::time_point since, double after) -> std::optional<Step> {
      const Clock::time_point began = Clock::now();
      for (;;) {
        top_up();
        const std::optional<std::uint64_t> now = nvml.energy_mj();
        const Clock::time_point at = Clock::now();
        if (!now) return std::nullopt;
        const bool long_enough = std::chrono::duration<double>(at - since).count() >= after;
        if (*now != from && long_enough) {
          poll();
          return Step{*now, finished, at};
        }
        if (*now != from) from = *now;
        if (std::chrono::duration<double>(at - began).count() > after + kStepWait) return std::nullopt;
      }
    };
    std::optional<Step> opened, closed;
    if (const std::optional<std::uint64_t> idle = nvml.energy_mj()) {
      opened = next_step(*idle, Clock::now(), 0);
      if (opened) closed = next_step(opened->millijoules, opened->at, options.energy_seconds);
    }
    KW_CUDA_CHECK(cudaStreamSynchronize(prepared.stream));
    for (const Mark& mark : marks) cudaEventDestroy(mark.event);
    for (cudaEvent_t event : spare) cudaEventDestroy(event);
    if (!opened) {
      if (!nvml.energy_unavailable().empty()) return energy;
      continue;
    }
    if (!closed || closed->millijoules <= opened->millijoules || closed->iterations <= opened->iterations)
      continue;
    const double joules = static_cast<double>(closed->millijoules - opened->millijoules) / 1000;
    const double seconds = std::chrono::duration<double>(closed->at - opened->at).count();
    const std::int64_t iterations = closed->iterations - opened->iterations;
    // As a report's measurement has them: one value per replicate, this
    // process being replicate 0.
    energy[k] = {{"energy_j", {joules / static_cast<double>(iterations)}},
                 {"energy_replicates", {0}},
                 {"power_w", {joules / seconds}},
                 {"iterations", iterations}};
  }
  return energy;
}

// One replicate of a case under full_bench: the warm-up, the timed rounds
// and what they measured, sharing the case's prepared state, the L2 flush
// buffer, the clock probe and NVML.
class FullBench {
 public:
  FullBench(Case& c, const DeviceFacts& device, const BenchOptions& options)
      : c_(c),
        options_(options),
        setup_started_(std::chrono::steady_clock::now()),
        prepared_(c, options),
        nvml_(device.pci_bus_id),
        // Writing a buffer twice the L2 size evicts whatever the previous sample left there.
        flush_bytes_(static_cast<std::size_t>(std::max<std::int64_t>(2 * device.l2_bytes, 8 << 20))) {
    impls_ = runnable_impls(c, skipped_, options.impls);
    if (impls_.empty())
      throw Error("no implementation of this case matches --impls \"" + options.impls + "\"");
    events_ = std::make_unique<EventBatch>(impls_.size());
    samples_.resize(impls_.size());
    KW_CUDA_CHECK(cudaMalloc(&flush_, flush_bytes_));
  }
  FullBench(const FullBench&) = delete;
  FullBench& operator=(const FullBench&) = delete;
  ~FullBench() {
    if (flush_ != nullptr) cudaFree(flush_);  // unwinding from an error: nowhere to report another
  }

  // Warm-up until the GPU settles: its clocks and power state after the
  // setup's idle gap take tens of milliseconds to reach the level that
  // continuous work holds. Settled: two batches in a row ran as fast per
  // round, within kSettledSpread, at the highest clock the probe has seen;
  // a warm-up stops there once it had its minimum rounds and time, and at
  // warmup_seconds at the latest. (A fixed 0.1 s was 7 of the 12 s that a
  // replicate of the bundled suite took on an H100.) Each batch
  // re-sizes the batches (the first round alone also loads the kernels).
  void warm_up() {
    double previous_per_round = 0;
    const auto warmup_started = std::chrono::steady_clock::now();
    for (int round = 0;;) {
      auto batch_started = std::chrono::steady_clock::now();
      run_batch(round, batch_rounds_, false);
      KW_CUDA_CHECK(cudaStreamSynchronize(prepared_.stream));
      const double mhz = probe_.mhz();
      reference_mhz_ = std::max(reference_mhz_, mhz);
      const double per_round =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - batch_started).count() /
          batch_rounds_;
      const bool settled = previous_per_round > 0 &&
                           std::abs(per_round / previous_per_round - 1) <= kSettledSpread &&
                           mhz >= 0.99 * reference_mhz_;
      previous_per_round = per_round;
      round += batch_rounds_;
      warmup_seconds_ =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_started).count();
      if (round >= options_.warmup_rounds && ((settled && warmup_seconds_ >= options_.warmup_min_seconds) ||
                                              warmup_seconds_ >= options_.warmup_seconds))
        break;
      batch_rounds_ =
          std::clamp(static_cast<int>(kBatchSeconds / std::max(per_round, 1e-7)), 1, kMaxBatchRounds);
    }
    setup_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_started_).count();
    read_nvml(true);
  }

  // The timed rounds, in batches, until every implementation's samples are
  // quiet enough or max_seconds have passed. Each round keeps the SM clock
  // the probe after its batch saw: under a power cap the clock moves by
  // several percent between replicates, and the detection compares
  // replicates at equal clock.
  void sample() {
    min_probe_mhz_ = reference_mhz_;
    started_ = std::chrono::steady_clock::now();
    for (int round = 0; round < options_.max_samples;) {
      int rounds = std::min(batch_rounds_, options_.max_samples - round);
      if (round < options_.min_samples)
        rounds = std::max(rounds, std::min(options_.min_samples, options_.max_samples) - round);
      events_->reserve(rounds);
      run_batch(round, rounds, true);
      bool nvml_throttled = read_nvml(false);  // while the batch runs
      KW_CUDA_CHECK(cudaStreamSynchronize(prepared_.stream));
      for (int r = 0; r < rounds; ++r) {
        for (std::size_t k = 0; k < impls_.size(); ++k) samples_[k].push_back(events_->elapsed_ns(r, k));
      }
      double mhz = probe_.mhz();
      min_probe_mhz_ = std::min(min_probe_mhz_, mhz);
      probe_mhz_sum_ += mhz;
      ++probes_;
      sample_mhz_.insert(sample_mhz_.end(), static_cast<std::size_t>(rounds), mhz);
      if (nvml_throttled || mhz < 0.97 * reference_mhz_) {
        for (int r = round; r < round + rounds; ++r) throttled_rounds_.push_back(r);
      }
      round += rounds;

      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      if (round >= options_.min_samples) {
        bool quiet = true;
        for (const auto& s : samples_)
          quiet = quiet && kw::common::relative_noise(s) <= options_.noise_target;
        if (quiet || elapsed >= options_.max_seconds) break;
      }
    }
    read_nvml(true);
    KW_CUDA_CHECK(cudaFree(flush_));  // before the energy window: its memory is the case's again
    flush_ = nullptr;
    energy_ = measure_energy(c_, impls_, prepared_, samples_, nvml_, options_);
  }

  CaseOutcome outcome() {
    CaseOutcome outcome;
    outcome.part = case_header(c_);
    json noise = json::object(), energy_iterations = json::object();
    const json measurements = measurements_json(noise, energy_iterations);
    outcome.part["measurements"] = measurements;
    outcome.part["gpu_state"] = gpu_state_json();
    outcome.details = details_json(noise, energy_iterations);
    const double first = measurements[0]["median_ns"];
    const double flops = c_.flops();
    outcome.message =
        std::to_string(samples_[0].size()) + " samples, " + impls_[0].name + " median " +
        format("%.2f", first / 1000) + " us, noise " +
        format("%.2f", 100 * noise[impls_[0].name].get<double>()) + "%" +
        (flops > 0 ? ", " + format("%.1f", flops / first / 1000) + " TFLOP/s" : "") +
        (throttled_rounds_.empty() ? "" : ", " + std::to_string(throttled_rounds_.size()) + " throttled");
    return outcome;
  }

 private:
  // Rounds run in batches that the host queues whole before it waits: the
  // GPU works back to back, in one pattern from the warm-up to the last
  // sample, and the clock probe, the NVML read and the host's bookkeeping
  // happen between batches or while the GPU works, never between two
  // samples of a batch (no per-sample host work the GPU waits on).
  void run_batch(int first_round, int rounds, bool timed) {
    cudaStream_t stream = prepared_.stream;
    for (int round = first_round; round < first_round + rounds; ++round) {
      // Interleaved: each round times every implementation once, rotating
      // which goes first, so drift hits all of them alike.
      for (std::size_t k = 0; k < impls_.size(); ++k) {
        std::size_t index = (k + static_cast<std::size_t>(round) + options_.order_offset) % impls_.size();
        KW_CUDA_CHECK(cudaMemsetAsync(flush_, round & 0xFF, flush_bytes_, stream));
        if (timed) events_->start(round - first_round, index, stream);
        run_impl(c_, impls_[index], *prepared_.state);
        if (timed) events_->stop(round - first_round, index, stream);
      }
    }
    probe_.enqueue(stream);
  }

  // Whether NVML says the GPU is throttled now; with `record_clocks`, its
  // clocks go into the case's gpu_state.
  bool read_nvml(bool record_clocks) {
    auto reading = nvml_.read();
    if (!reading) return false;
    if (record_clocks) {
      sm_mhz_.push_back(reading->sm_mhz);
      mem_mhz_.push_back(reading->mem_mhz);
    }
    temp_max_ = std::max(temp_max_, reading->temp_c);
    power_max_ = std::max(power_max_, reading->power_w);
    reasons_ |= reading->clocks_event_reasons;
    return (reading->clocks_event_reasons & kThrottleMask) != 0;
  }

  json measurements_json(json& noise, json& energy_iterations) const {
    json measurements = json::array();
    const double flops = c_.flops(), bytes = c_.bytes();
    for (std::size_t k = 0; k < impls_.size(); ++k) {
      json m{{"impl", impls_[k].name},
             {"samples_ns", samples_[k]},
             {"median_ns", kw::common::median(samples_[k])},
             {"peak_mem_bytes", prepared_.state->bytes_for(impls_[k].name)}};
      if (flops > 0) m["flops"] = flops;
      if (bytes > 0) m["bytes"] = bytes;
      if (!throttled_rounds_.empty()) m["throttled_samples"] = throttled_rounds_;
      if (std::all_of(sample_mhz_.begin(), sample_mhz_.end(), [](double mhz) { return mhz > 0; }))
        m["sm_mhz"] = sample_mhz_;
      if (energy_[k].contains("energy_j")) {
        for (const char* key : {"energy_j", "energy_replicates", "power_w"}) m[key] = energy_[k][key];
        energy_iterations[impls_[k].name] = energy_[k]["iterations"];
      }
      measurements.push_back(std::move(m));
      noise[impls_[k].name] = kw::common::relative_noise(samples_[k]);
    }
    return measurements;
  }

  json gpu_state_json() const {
    json gpu_state = {{"sm_mhz", sm_mhz_}, {"mem_mhz", mem_mhz_}, {"throttle_reasons", reasons_}};
    if (nvml_.available()) {
      gpu_state["temp_c_max"] = temp_max_;
      gpu_state["power_w_max"] = power_max_;
    }
    return gpu_state;
  }

  json details_json(const json& noise, const json& energy_iterations) const {
    json details = {{"samples", samples_[0].size()},
                    {"setup_seconds", setup_seconds_},
                    {"warmup_seconds", warmup_seconds_},
                    // The timed rounds and the energy window after them.
                    {"measure_seconds",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count()},
                    {"relative_noise", noise},
                    {"reference_sm_mhz", reference_mhz_},
                    {"min_probe_sm_mhz", min_probe_mhz_},
                    {"mean_probe_sm_mhz", probes_ > 0 ? probe_mhz_sum_ / probes_ : 0.0},
                    {"throttled_samples", throttled_rounds_.size()},
                    {"skipped_baselines", skipped_}};
    if (!nvml_.available()) details["nvml"] = nvml_.unavailable();
    if (!energy_iterations.empty()) details["energy_iterations"] = energy_iterations;
    if (options_.energy_seconds > 0 && energy_iterations.empty())
      details["energy"] = nvml_.energy_unavailable().empty() ? "NVML's energy counter did not step"
                                                             : nvml_.energy_unavailable();
    return details;
  }

  Case& c_;
  const BenchOptions& options_;
  const std::chrono::steady_clock::time_point setup_started_;
  Prepared prepared_;
  Nvml nvml_;
  ClockProbe probe_;
  const std::size_t flush_bytes_;
  void* flush_ = nullptr;
  json skipped_ = json::object();
  std::vector<Impl> impls_;
  std::unique_ptr<EventBatch> events_;

  int batch_rounds_ = 1;
  double reference_mhz_ = 0, warmup_seconds_ = 0, setup_seconds_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::vector<double>> samples_;
  std::vector<double> sample_mhz_;
  std::vector<std::int64_t> throttled_rounds_;
  double min_probe_mhz_ = 0, probe_mhz_sum_ = 0;
  int probes_ = 0;
  std::vector<json> energy_;
  std::vector<double> sm_mhz_, mem_mhz_;
  double temp_max_ = 0, power_max_ = 0;
  std::uint64_t reasons_ = 0;
};

CaseOutcome run_full_bench(Case& c, const DeviceFacts& device, const BenchOptions& options) {
  FullBench bench(c, device, options);
  bench.warm_up();
  bench.sample();
  return bench.outcome();
}

}  // namespace kwbench
