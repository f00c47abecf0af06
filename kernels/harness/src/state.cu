#include <cstring>

#include "kwbench/kwbench.hpp"

namespace kwbench {

namespace {

// Counter-based generator: every element from (seed, index) alone, so filling
// a large buffer needs no host round trip and no state per thread.
__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(float* out, std::size_t count, float low, float high,
                                    std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float unit =
        static_cast<float>(splitmix64(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (1.0f / 16777216.0f);
    out[i] = low + (high - low) * unit;
  }
}

}  // namespace

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call +
              " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

State::~State() {
  for (auto& [pointer, _] : allocations_) cudaFree(pointer);  // teardown: errors here have nowhere to go
}

void* State::alloc(std::size_t bytes, const std::string& owner) {
  void* pointer = nullptr;
  KW_CUDA_CHECK(cudaMalloc(&pointer, bytes));
  allocations_.push_back({pointer, {bytes, owner}});
  return pointer;
}

bool State::wants(const std::string& impl) const {
  return glob_match(timed_, impl);
}

std::int64_t State::bytes_for(const std::string& impl) const {
  std::int64_t total = 0;
  for (const auto& [_, allocation] : allocations_) {
    if (allocation.second.empty() || allocation.second == impl)
      total += static_cast<std::int64_t>(allocation.first);
  }
  return total;
}

void fill_uniform(State& state, float* device, std::size_t count, float low, float high) {
  std::uint64_t seed = state.rng()();
  fill_uniform_kernel<<<1024, 256, 0, state.stream()>>>(device, count, low, high, seed);
  KW_CUDA_CHECK_LAUNCH();
}

void fill_nan(State& state, void* device, std::size_t bytes) {
  KW_CUDA_CHECK(cudaMemsetAsync(device, 0xFF, bytes, state.stream()));
}

Registry& Registry::instance() {
  static Registry registry;
  return registry;
}

void Registry::add_case(std::function<std::unique_ptr<Case>()> factory) {
  cases_.push_back(std::move(factory));
}
void Registry::add_kernel(KernelInfo kernel) {
  kernels_.push_back(std::move(kernel));
}
void Registry::add_library(LibraryInfo library) {
  libraries_.push_back(std::move(library));
}

}  // namespace kwbench
