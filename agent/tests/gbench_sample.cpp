// A real Google Benchmark program (the installed library) whose JSON output
// the gbench adapter test reads: one plain benchmark and one with manual time.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <vector>

static void BM_sum(benchmark::State& state) {
  std::vector<double> values(static_cast<std::size_t>(state.range(0)), 1.5);
  for (auto _ : state) {
    double total = 0;
    for (double v : values) total += v;
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_sum)->Arg(1024);

static void BM_manual(benchmark::State& state) {
  for (auto _ : state) {
    auto start = std::chrono::high_resolution_clock::now();
    double x = 0;
    for (int i = 0; i < 1000; ++i) x += std::sqrt(static_cast<double>(i));
    benchmark::DoNotOptimize(x);
    auto end = std::chrono::high_resolution_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
}
BENCHMARK(BM_manual)->UseManualTime();

BENCHMARK_MAIN();
