// The harness's self-test kernels as a Google Benchmark bench, correct and
// broken on purpose, so the GPU tests show each broken kernel caught through
// a gbench bench as through kwbench: load (it links libkw_selftest_good_lib,
// whose broken build lacks a symbol), launch_geometry (kernelwatch.json's
// `launches`, observed by libkw_inject.so), correctness (`--kw-check NAME`,
// this binary's own check command) and full_bench.
//
// Each benchmark times one launch per iteration with CUDA events
// (UseManualTime). Built where Google Benchmark is installed (not on the GPU
// machine): tools/stage-gbench-selftest.sh carries it there.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../scale_kernels.cuh"

extern "C" void kw_selftest_entry(const float* x, float* y, std::size_t n, cudaStream_t stream);

namespace {

using kwbench_selftest::Variant;

constexpr std::size_t kN = std::size_t{1} << 24;
constexpr float kA = 1.5f;

struct Variants {
  const char* name;
  Variant variant;
};
constexpr Variants kVariants[] = {
    {"ok", Variant::good}, {"block128", Variant::block128}, {"unwritten", Variant::unwritten},
    {"nan", Variant::nan}, {"slow", Variant::slow},         {"fault", Variant::fault}};

bool check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
  return false;
}

// x in [0, 1), from a fixed host sequence.
bool make_input(float** x, float** y) {
  std::vector<float> host(kN);
  unsigned state = 12345;
  for (float& value : host) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  }
  return check(cudaMalloc(x, kN * sizeof(float)), "cudaMalloc x") &&
         check(cudaMalloc(y, kN * sizeof(float)), "cudaMalloc y") &&
         check(cudaMemcpy(*x, host.data(), kN * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy x");
}

void scale(benchmark::State& state, Variant variant) {
  float *x = nullptr, *y = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  if (!make_input(&x, &y) || !check(cudaEventCreate(&start), "cudaEventCreate") ||
      !check(cudaEventCreate(&stop), "cudaEventCreate")) {
    state.SkipWithError("CUDA setup failed");
    return;
  }
  for (auto _ : state) {
    cudaEventRecord(start);
    kwbench_selftest::launch_scale(variant, x, y, kA, kN, nullptr);
    cudaEventRecord(stop);
    const cudaError_t error = cudaEventSynchronize(stop);
    if (error != cudaSuccess) {
      state.SkipWithError(cudaGetErrorString(error));
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1000.0);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * kN * sizeof(float)));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(x);
  cudaFree(y);
}

// 160 KiB of dynamic shared memory, its limit never raised: refused.
void big_smem(benchmark::State& state) {
  float* y = nullptr;
  if (!check(cudaMalloc(&y, 256 * sizeof(float)), "cudaMalloc")) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  for (auto _ : state) {
    kwbench_selftest::big_smem_kernel<<<1, 256, 160 * 1024>>>(y);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) {
      state.SkipWithError(cudaGetErrorString(error));
      break;
    }
    cudaDeviceSynchronize();
    state.SetIterationTime(1e-6);
  }
  cudaFree(y);
}

// The library's entry point: a launch through the shared library, so the
// library is needed at start.
void library_entry(benchmark::State& state) {
  float *x = nullptr, *y = nullptr;
  if (!make_input(&x, &y)) {
    state.SkipWithError("CUDA setup failed");
    return;
  }
  for (auto _ : state) {
    kw_selftest_entry(x, y, kN, nullptr);
    cudaDeviceSynchronize();
    state.SetIterationTime(1e-6);
  }
  cudaFree(x);
  cudaFree(y);
}

// --kw-check NAME: y = a * x of one variant, compared on the host. Exit 0
// when every value is finite and within 1e-6 relative L2, else 1 saying why.
int check_variant(const std::string& name) {
  for (const Variants& v : kVariants) {
    if (name != v.name) continue;
    float *x = nullptr, *y = nullptr;
    if (!make_input(&x, &y)) return 1;
    std::vector<float> nan_fill(kN, std::nanf(""));
    if (!check(cudaMemcpy(y, nan_fill.data(), kN * sizeof(float), cudaMemcpyHostToDevice), "poison y"))
      return 1;
    kwbench_selftest::launch_scale(v.variant, x, y, kA, kN, nullptr);
    if (!check(cudaGetLastError(), "launch") || !check(cudaDeviceSynchronize(), "scale kernel")) return 1;
    std::vector<float> hx(kN), hy(kN);
    if (!check(cudaMemcpy(hx.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost), "copy x") ||
        !check(cudaMemcpy(hy.data(), y, kN * sizeof(float), cudaMemcpyDeviceToHost), "copy y"))
      return 1;
    double error = 0, norm = 0;
    std::size_t nonfinite = 0;
    for (std::size_t i = 0; i < kN; ++i) {
      if (!std::isfinite(hy[i])) {
        ++nonfinite;
        continue;
      }
      const double reference = static_cast<double>(kA) * hx[i];
      error += (hy[i] - reference) * (hy[i] - reference);
      norm += reference * reference;
    }
    const double rel = norm > 0 ? std::sqrt(error / norm) : 0;
    std::printf("%s: %zu non-finite outputs, relative L2 error %.3g\n", name.c_str(), nonfinite, rel);
    return nonfinite == 0 && rel <= 1e-6 ? 0 : 1;
  }
  std::fprintf(stderr, "--kw-check: no variant \"%s\"\n", name.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--kw-check") == 0) return check_variant(argv[2]);
  for (const Variants& v : kVariants)
    benchmark::RegisterBenchmark((std::string("scale/") + v.name).c_str(), scale, v.variant)->UseManualTime();
  benchmark::RegisterBenchmark("big_smem", big_smem)->UseManualTime()->Iterations(1);
  benchmark::RegisterBenchmark("library_entry", library_entry)->UseManualTime()->Iterations(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
