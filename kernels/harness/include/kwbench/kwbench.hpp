// kwbench: the harness a CUDA repository links to be tracked by kernelwatch.
// A bench executable declares cases (subclasses of kwbench::Case), registers
// them, and calls kwbench::main(); the agent then runs its stages:
//   BENCH --list
//   BENCH --stage preflight|load|launch_geometry|correctness|quick_bench|full_bench [--case GLOB] --json FILE
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwbench {

// Thrown by the check macros: the failing call, its error, file and line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

#define KW_CUDA_CHECK(call)                                                                            \
  do {                                                                                                 \
    cudaError_t kw_status_ = (call);                                                                   \
    if (kw_status_ != cudaSuccess) ::kwbench::throw_cuda_error(kw_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error, then (in debug) nothing more.
#define KW_CUDA_CHECK_LAUNCH() KW_CUDA_CHECK(cudaGetLastError())

struct Dim3 {
  int x = 1, y = 1, z = 1;
  bool operator==(const Dim3&) const = default;
};

// The launch a case promises; the launch_geometry stage holds the launches
// observed with CUPTI to it.
struct ExpectedLaunch {
  std::string kernel_pattern;  // glob over the demangled kernel name
  Dim3 block;
  std::optional<Dim3> grid;
  std::optional<int> max_registers;
  std::optional<std::int64_t> max_shared_bytes;
};

// quick_bench fails when the candidate's speedup over `versus` (a baseline
// name; empty = time bound only) falls outside [min_speedup, max_speedup], or
// its median time exceeds max_ns. `report_only(versus)` says the speedup and
// holds it to no bound (a kernel that is meant to be slower than a baseline,
// say, or one whose range is not known yet).
struct SanityRange {
  std::string versus;
  double min_speedup = 0;
  double max_speedup = 1e9;
  double max_ns = 0;  // 0 = no bound
  bool bounded = true;

  static SanityRange report_only(std::string versus) { return {std::move(versus), 0, 1e9, 0, false}; }
};

struct Accuracy {
  double rel_l2_err = 0;
  double max_abs_err = 0;
  std::int64_t nonfinite = 0;
  bool reference_from_cache = false;  // the reference came from the ReferenceCache
};

// Reference outputs kept on the host across runs and commits: correctness
// need not recompute a reference whose inputs and code did not change. A
// case keys an entry by everything its reference depends on (the inputs'
// seed and generator, the elements checked, the reference code's version):
// a key that misses one serves a stale reference. The directory is
// $KWBENCH_REFERENCE_CACHE ("off": no cache), else $XDG_CACHE_HOME/kwbench or
// ~/.cache/kwbench; past 4 GiB the least recently written entries go.
class ReferenceCache {
 public:
  static ReferenceCache& instance();
  explicit ReferenceCache(std::filesystem::path dir, std::uintmax_t max_bytes = std::uintmax_t{4} << 30);
  // nullopt: no entry for this key (or no cache).
  std::optional<std::vector<float>> load(const std::string& key) const;
  // A cache that cannot be written is no error: the next run computes again.
  void store(const std::string& key, const std::vector<float>& values) const;

 private:
  std::filesystem::path dir_;
  std::uintmax_t max_bytes_;
};

// Per-case device state: a stream, a seeded generator, and allocations
// attributed to an implementation so peak device memory can be reported.
class State {
 public:
  // `timed`: glob over the implementations this stage times ("candidate",
  // "baseline:NAME"); setup() may skip building the others.
  State(cudaStream_t stream, std::uint64_t seed, std::string timed = "*")
      : stream_(stream), seed_(seed), rng_(seed), timed_(std::move(timed)) {}
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  cudaStream_t stream() const { return stream_; }
  std::mt19937_64& rng() { return rng_; }
  std::uint64_t seed() const { return seed_; }  // rng()'s: what the case's inputs derive from
  bool wants(const std::string& impl) const;

  // `owner`: "" (inputs/outputs every implementation needs), "candidate" or
  // "baseline:<name>".
  void* alloc(std::size_t bytes, const std::string& owner = "");
  template <typename T>
  T* alloc_n(std::size_t count, const std::string& owner = "") {
    return static_cast<T*>(alloc(count * sizeof(T), owner));
  }
  std::int64_t bytes_for(const std::string& impl) const;

 private:
  cudaStream_t stream_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
  std::string timed_;
  std::vector<std::pair<void*, std::pair<std::size_t, std::string>>> allocations_;
};

class Case {
 public:
  virtual ~Case() = default;

  virtual std::string name() const = 0;
  virtual nlohmann::json params() const { return nlohmann::json::object(); }
  // Allocate and fill inputs with fresh seeded random data (never zeros),
  // outputs, workspaces, and the reference if it is computed up front.
  virtual void setup(State& state) = 0;
  // Release what setup() made beyond State allocations (library handles,
  // plans) while its stream still exists; the harness calls it after each
  // stage of the case, and may call setup() again later in the same process.
  virtual void teardown(State&) {}
  virtual void run_candidate(State& state) = 0;
  virtual std::vector<std::string> baselines() const { return {}; }
  // Each called with a name from baselines(): by name, so a reordered list
  // cannot time one baseline under another's name. Empty string: ready;
  // otherwise why this baseline cannot run here (skipped).
  virtual std::string baseline_unavailable(const std::string& /*baseline*/) const { return {}; }
  virtual void run_baseline(const std::string& /*baseline*/, State&) {}
  // Fill the candidate's output with NaN before the correctness run.
  virtual void poison_output(State& state) = 0;
  // Compare the candidate's output with a higher-precision reference.
  virtual Accuracy check(State& state) = 0;
  virtual double tolerance() const = 0;  // bound on rel_l2_err
  virtual ExpectedLaunch expected_launch() const = 0;
  virtual SanityRange sanity() const { return {}; }
  virtual double flops() const { return 0; }
  virtual double bytes() const { return 0; }
  // False for a correctness-only case (an edge shape nobody ships but every
  // dispatch must get right): launch_geometry and correctness run it, the
  // timed stages (quick_bench, full_bench) leave it out.
  virtual bool timed() const { return true; }
};

// A kernel the load stage checks against this device: image present,
// registers, shared memory (static + the dynamic amount it will launch with),
// threads per block. `configure` runs first (e.g. cudaFuncSetAttribute to raise
// its dynamic shared memory limit), exactly as the launch code does.
struct KernelInfo {
  std::string name;
  const void* function = nullptr;
  int block_threads = 0;
  std::size_t dynamic_smem = 0;
  std::function<void()> configure;
};

// A shared library the load stage must be able to dlopen with RTLD_NOW, and
// the symbols it must resolve.
struct LibraryInfo {
  std::string path;
  std::vector<std::string> symbols;
};

class Registry {
 public:
  static Registry& instance();
  void add_case(std::function<std::unique_ptr<Case>()> factory);
  void add_kernel(KernelInfo kernel);
  void add_library(LibraryInfo library);

  std::vector<std::function<std::unique_ptr<Case>()>>& cases() { return cases_; }
  std::vector<KernelInfo>& kernels() { return kernels_; }
  std::vector<LibraryInfo>& libraries() { return libraries_; }

 private:
  std::vector<std::function<std::unique_ptr<Case>()>> cases_;
  std::vector<KernelInfo> kernels_;
  std::vector<LibraryInfo> libraries_;
};

// Runs the command line; returns the process exit code: 0 passed or skipped,
// 1 the stage failed, 2 usage or harness error.
int main(int argc, char** argv);

// Shell-style glob (* and ?) over a whole name: case selection, kernel
// patterns.
bool glob_match(const std::string& pattern, const std::string& text);

// Helpers for cases.
void fill_uniform(State& state, float* device, std::size_t count, float low, float high);
void fill_nan(State& state, void* device, std::size_t bytes);  // 0xFF bytes: NaN in every float format

}  // namespace kwbench
