// Four Google Benchmark benchmarks of different kinds (a sort, a sum, a copy,
// an allocating map): the CPU repository of the Google Benchmark A/B e2e test
// and of tools/gbench-busy-host.sh. SORT_N sets how much BM_Sort sorts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#ifndef SORT_N
#define SORT_N 20000
#endif

static void BM_Sort(benchmark::State& state) {
  std::mt19937 rng(7);
  std::vector<int> data(SORT_N);
  for (int& v : data) v = static_cast<int>(rng());
  for (auto _ : state) {
    std::vector<int> copy = data;
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
  }
}
BENCHMARK(BM_Sort);

static void BM_Sum(benchmark::State& state) {
  std::vector<double> values(20000, 1.5);
  for (auto _ : state) benchmark::DoNotOptimize(std::accumulate(values.begin(), values.end(), 0.0));
}
BENCHMARK(BM_Sum);

static void BM_Copy(benchmark::State& state) {
  std::vector<char> from(1 << 16, 'x'), to(1 << 16);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Copy);

static void BM_Map(benchmark::State& state) {
  for (auto _ : state) {
    std::map<int, int> m;
    for (int i = 0; i < 300; ++i) m[(i * 7919) % 1000] = i;
    benchmark::DoNotOptimize(m.size());
  }
}
BENCHMARK(BM_Map);

BENCHMARK_MAIN();
