// The attention kernel on a real GPU against the fp32 reference (itself
// checked against fp64 on the CPU): every dtype x head dim x causal variant,
// odd sequence lengths, Sq != Sk, a [B, S, H, D] layout, poisoned outputs,
// bitwise repeatability, and the validation errors. Skipped without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../../tests/support/subprocess.hpp"
#include "../../../tests/support/temp_dir.hpp"

#include "../src/reference.hpp"
#include "kw_attention/attention.hpp"

namespace {

using kw::attention::DType;
using kw::attention::ForwardParams;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

bool has_gpu() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(std::size_t bytes) {
    if (cudaMalloc(&data, bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Problem {
  DType dtype;
  int batch, heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  bool bshd = false;  // [B, S, H, D] instead of [B, H, S, D]
};

std::string describe(const Problem& p) {
  return std::string(kw::attention::dtype_name(p.dtype)) + " d" + std::to_string(p.head_dim) + " b" +
         std::to_string(p.batch) + " h" + std::to_string(p.heads) + " sq" + std::to_string(p.seqlen_q) +
         " sk" + std::to_string(p.seqlen_k) + (p.causal ? " causal" : "") + (p.bshd ? " bshd" : "");
}

kw::attention::TensorRef strides(const Problem& p, const void* data, int seqlen) {
  if (!p.bshd) return kw::attention::bhsd(data, p.heads, seqlen, p.head_dim);
  const std::int64_t d = p.head_dim;
  return {data, static_cast<std::int64_t>(seqlen) * p.heads * d, d, p.heads * d};
}

// Self-attention over fresh random [B, H, S, D] inputs (seeds 1-3, fp16 unless told),
// the output pointer left for the caller.
struct RandomSelfAttention {
  std::size_t elems;
  DeviceBuffer q, k, v;
  ForwardParams params;
  RandomSelfAttention(int batch, int heads, int seqlen, int head_dim, bool causal, DType dtype = DType::fp16)
      : elems(static_cast<std::size_t>(batch) * heads * seqlen * head_dim),
        q(elems * 2),
        k(elems * 2),
        v(elems * 2) {
    kw::attention::fill_random(dtype, q.data, elems, 1.7f, 1, nullptr);
    kw::attention::fill_random(dtype, k.data, elems, 1.7f, 2, nullptr);
    kw::attention::fill_random(dtype, v.data, elems, 1.7f, 3, nullptr);
    params.dtype = dtype;
    params.batch = batch;
    params.heads = heads;
    params.seqlen_q = params.seqlen_k = seqlen;
    params.head_dim = head_dim;
    params.q = kw::attention::bhsd(q.data, heads, seqlen, head_dim);
    params.k = kw::attention::bhsd(k.data, heads, seqlen, head_dim);
    params.v = kw::attention::bhsd(v.data, heads, seqlen, head_dim);
    params.o_strides = params.q;
    params.softmax_scale = 0.088f;
    params.causal = causal;
  }
};

// Runs the kernel on fresh random inputs; returns (relative L2 error of O,
// max |LSE error|, count of non-finite outputs) against the GPU reference.
std::tuple<double, double, std::int64_t> run_and_compare(const Problem& p, std::uint64_t seed) {
  const std::size_t q_elems = static_cast<std::size_t>(p.batch) * p.heads * p.seqlen_q * p.head_dim;
  const std::size_t k_elems = static_cast<std::size_t>(p.batch) * p.heads * p.seqlen_k * p.head_dim;
  const std::size_t rows = static_cast<std::size_t>(p.batch) * p.heads * p.seqlen_q;
  DeviceBuffer q(q_elems * 2), k(k_elems * 2), v(k_elems * 2), o(q_elems * 2), lse(rows * 4);
  DeviceBuffer ref_o(rows * p.head_dim * 4), ref_lse(rows * 4), row_ids(rows * 8);
  kw::attention::fill_random(p.dtype, q.data, q_elems, std::sqrt(3.f), seed, nullptr);
  kw::attention::fill_random(p.dtype, k.data, k_elems, std::sqrt(3.f), seed + 1, nullptr);
  kw::attention::fill_random(p.dtype, v.data, k_elems, std::sqrt(3.f), seed + 2, nullptr);
  cudaMemset(o.data, 0xFF, q_elems * 2);  // NaN poison: unwritten outputs show
  cudaMemset(lse.data, 0xFF, rows * 4);

  ForwardParams params;
  params.dtype = p.dtype;
  params.batch = p.batch;
  params.heads = p.heads;
  params.seqlen_q = p.seqlen_q;
  params.seqlen_k = p.seqlen_k;
  params.head_dim = p.head_dim;
  params.q = strides(p, q.data, p.seqlen_q);
  params.k = strides(p, k.data, p.seqlen_k);
  params.v = strides(p, v.data, p.seqlen_k);
  params.o = o.data;
  params.o_strides = strides(p, o.data, p.seqlen_q);
  params.lse = static_cast<float*>(lse.data);
  params.softmax_scale = 1.f / std::sqrt(static_cast<float>(p.head_dim));
  params.causal = p.causal;
  kw::attention::forward(params, nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("kernel failed");

  std::vector<std::int64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), 0);
  cudaMemcpy(row_ids.data, ids.data(), rows * 8, cudaMemcpyHostToDevice);
  kw::attention::reference_rows(params, static_cast<std::int64_t*>(row_ids.data), static_cast<int>(rows),
                                static_cast<float*>(ref_o.data), static_cast<float*>(ref_lse.data), nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("reference failed");

  std::vector<double> got = kw::attention::to_host_double(p.dtype, o.data, q_elems);
  std::vector<float> want(rows * p.head_dim), got_lse(rows), want_lse(rows);
  cudaMemcpy(want.data(), ref_o.data, want.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(got_lse.data(), lse.data, rows * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(want_lse.data(), ref_lse.data, rows * 4, cudaMemcpyDeviceToHost);

  double error = 0, norm = 0, lse_error = 0;
  std::int64_t nonfinite = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t bh = r / p.seqlen_q, i = r % p.seqlen_q;
    const std::size_t b = bh / p.heads, h = bh % p.heads;
    const std::size_t offset = p.bshd ? ((b * p.seqlen_q + i) * p.heads + h) * p.head_dim : r * p.head_dim;
    for (int d = 0; d < p.head_dim; ++d) {
      const double x = got[offset + d], y = want[r * p.head_dim + d];
      if (!std::isfinite(x)) {
        ++nonfinite;
        continue;
      }
      error += (x - y) * (x - y);
      norm += y * y;
    }
    if (!std::isfinite(got_lse[r]))
      ++nonfinite;
    else
      lse_error = std::max(lse_error, static_cast<double>(std::abs(got_lse[r] - want_lse[r])));
  }
  return {std::sqrt(error / norm), lse_error, nonfinite};
}

class AttentionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_gpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(AttentionGpuTest, GpuReferenceMatchesCpuFp64) {
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (int head_dim : {64, 128}) {
      for (bool causal : {false, true}) {
        const int batch = 2, heads = 2, seqlen_q = 37, seqlen_k = causal ? 37 : 53;
        const std::size_t q_elems = static_cast<std::size_t>(batch) * heads * seqlen_q * head_dim;
        const std::size_t k_elems = static_cast<std::size_t>(batch) * heads * seqlen_k * head_dim;
        const std::size_t rows = static_cast<std::size_t>(batch) * heads * seqlen_q;
        DeviceBuffer q(q_elems * 2), k(k_elems * 2), v(k_elems * 2), out(rows * head_dim * 4), lse(rows * 4),
            ids(rows * 8);
        kw::attention::fill_random(dtype, q.data, q_elems, 1.7f, 11, nullptr);
        kw::attention::fill_random(dtype, k.data, k_elems, 1.7f, 12, nullptr);
        kw::attention::fill_random(dtype, v.data, k_elems, 1.7f, 13, nullptr);
        ForwardParams params;
        params.dtype = dtype;
        params.batch = batch;
        params.heads = heads;
        params.seqlen_q = seqlen_q;
        params.seqlen_k = seqlen_k;
        params.head_dim = head_dim;
        params.q = kw::attention::bhsd(q.data, heads, seqlen_q, head_dim);
        params.k = kw::attention::bhsd(k.data, heads, seqlen_k, head_dim);
        params.v = kw::attention::bhsd(v.data, heads, seqlen_k, head_dim);
        params.o = out.data;  // unused by the reference, must only pass validation
        params.o_strides = params.q;
        params.softmax_scale = 0.125f;
        params.causal = causal;
        std::vector<std::int64_t> row_ids(rows);
        std::iota(row_ids.begin(), row_ids.end(), 0);
        CUDA_OK(cudaMemcpy(ids.data, row_ids.data(), rows * 8, cudaMemcpyHostToDevice));
        kw::attention::reference_rows(params, static_cast<std::int64_t*>(ids.data), static_cast<int>(rows),
                                      static_cast<float*>(out.data), static_cast<float*>(lse.data), nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> got(rows * head_dim), got_lse(rows);
        CUDA_OK(cudaMemcpy(got.data(), out.data, got.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(got_lse.data(), lse.data, rows * 4, cudaMemcpyDeviceToHost));

        std::vector<double> lse_cpu;
        std::vector<double> want =
            kw::attention::reference_cpu(kw::attention::to_host_double(dtype, q.data, q_elems),
                                         kw::attention::to_host_double(dtype, k.data, k_elems),
                                         kw::attention::to_host_double(dtype, v.data, k_elems), batch, heads,
                                         seqlen_q, seqlen_k, head_dim, 0.125, causal, lse_cpu);
        double error = 0, norm = 0, lse_error = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
          error += (got[i] - want[i]) * (got[i] - want[i]);
          norm += want[i] * want[i];
        }
        for (std::size_t r = 0; r < rows; ++r)
          lse_error = std::max(lse_error, std::abs(got_lse[r] - lse_cpu[r]));
        // fp32 arithmetic on identical inputs: far under 1e-5 relative.
        EXPECT_LT(std::sqrt(error / norm), 1e-5)
            << kw::attention::dtype_name(dtype) << " d" << head_dim << (causal ? " causal" : "");
        EXPECT_LT(lse_error, 1e-4);
      }
    }
  }
}

TEST_F(AttentionGpuTest, EveryVariantMatchesTheReferenceIncludingOddLengths) {
  std::uint64_t seed = 100;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (int head_dim : {64, 128}) {
      for (bool causal : {false, true}) {
        for (int seqlen : {1, 17, 64, 129, 512, 513, 1000}) {
          Problem p{dtype, 2, 3, seqlen, seqlen, head_dim, causal};
          auto [rel, lse_error, nonfinite] = run_and_compare(p, seed += 3);
          EXPECT_EQ(nonfinite, 0) << describe(p);
          EXPECT_LT(rel, dtype == DType::fp16 ? 2e-3 : 1e-2) << describe(p);
          EXPECT_LT(lse_error, 1e-3) << describe(p);
        }
      }
    }
  }
}

// The bench's correctness check sums errors on the device: the same sums as
// on the host, over the checked rows only, with every NaN of O and the LSE
// counted, wherever it is, and none of them summed.
TEST_F(AttentionGpuTest, TheDeviceComparisonSumsWhatTheHostDoes) {
  for (DType dtype : {DType::fp16, DType::bf16}) {
    const int batch = 2, heads = 3, seqlen = 200, head_dim = 64;
    const std::size_t rows = static_cast<std::size_t>(batch) * heads * seqlen, elems = rows * head_dim;
    RandomSelfAttention attention(batch, heads, seqlen, head_dim, false, dtype);
    DeviceBuffer o(elems * 2), lse(rows * 4);
    ForwardParams& params = attention.params;
    params.o = o.data;
    params.lse = static_cast<float*>(lse.data);
    kw::attention::forward(params, nullptr);
    // NaN in a checked row, in an unchecked one, and in a checked row's LSE.
    std::vector<std::int64_t> checked;
    for (std::int64_t r = 1; r < static_cast<std::int64_t>(rows); r += 3) checked.push_back(r);
    CUDA_OK(cudaMemset(static_cast<char*>(o.data) + (checked[5] * head_dim + 7) * 2, 0xFF, 2));
    CUDA_OK(cudaMemset(static_cast<char*>(o.data) + (std::ptrdiff_t{3} * head_dim + 1) * 2, 0xFF, 2));
    CUDA_OK(cudaMemset(static_cast<float*>(lse.data) + checked[9], 0xFF, 4));

    const std::size_t n = checked.size();
    DeviceBuffer ids(n * 8), expected(n * (head_dim + 1) * 4);
    CUDA_OK(cudaMemcpy(ids.data, checked.data(), n * 8, cudaMemcpyHostToDevice));
    auto* want_device = static_cast<float*>(expected.data);
    kw::attention::reference_rows(params, static_cast<std::int64_t*>(ids.data), static_cast<int>(n),
                                  want_device, want_device + n * head_dim, nullptr);
    const kw::attention::OutputErrors device =
        kw::attention::compare_rows(params, static_cast<std::int64_t*>(ids.data), static_cast<int>(n),
                                    want_device, want_device + n * head_dim, nullptr);

    std::vector<double> got = kw::attention::to_host_double(dtype, o.data, elems);
    std::vector<float> got_lse(rows), want(n * (head_dim + 1));
    CUDA_OK(cudaMemcpy(got_lse.data(), lse.data, rows * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(want.data(), expected.data, want.size() * 4, cudaMemcpyDeviceToHost));
    kw::attention::OutputErrors host;
    for (double x : got) host.nonfinite += !std::isfinite(x);
    for (float x : got_lse) host.nonfinite += !std::isfinite(x);
    for (std::size_t r = 0; r < n; ++r) {
      for (int d = 0; d < head_dim; ++d) {
        const double x = got[checked[r] * head_dim + d], y = want[r * head_dim + d];
        if (!std::isfinite(x)) continue;
        host.error_sq += (x - y) * (x - y);
        host.norm_sq += y * y;
        host.max_abs = std::max(host.max_abs, std::abs(x - y));
      }
      const double x = got_lse[checked[r]], y = want[n * head_dim + r];
      if (!std::isfinite(x)) continue;
      host.lse_error_sq += (x - y) * (x - y);
      host.lse_norm_sq += y * y;
    }
    SCOPED_TRACE(kw::attention::dtype_name(dtype));
    EXPECT_EQ(device.nonfinite, 3u);
    EXPECT_EQ(host.nonfinite, 3u);
    EXPECT_GT(host.error_sq, 0);
    for (auto [ours, theirs] : {std::pair{device.error_sq, host.error_sq},
                                {device.norm_sq, host.norm_sq},
                                {device.lse_error_sq, host.lse_error_sq},
                                {device.lse_norm_sq, host.lse_norm_sq}})
      EXPECT_NEAR(ours, theirs, 1e-9 * std::abs(theirs));
    EXPECT_EQ(device.max_abs, host.max_abs);
  }
}

TEST_F(AttentionGpuTest, DifferentQueryAndKeyLengthsAndBshdLayout) {
  std::uint64_t seed = 500;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (Problem p :
         {Problem{dtype, 1, 2, 77, 300, 64, false}, Problem{dtype, 1, 2, 300, 77, 128, false},
          Problem{dtype, 2, 2, 200, 330, 128, true}, Problem{dtype, 3, 5, 257, 257, 64, true, true},
          Problem{dtype, 2, 4, 190, 190, 128, false, true}}) {
      auto [rel, lse_error, nonfinite] = run_and_compare(p, seed += 3);
      EXPECT_EQ(nonfinite, 0) << describe(p);
      EXPECT_LT(rel, dtype == DType::fp16 ? 2e-3 : 1e-2) << describe(p);
      EXPECT_LT(lse_error, 1e-3) << describe(p);
    }
  }
}

TEST_F(AttentionGpuTest, RepeatedRunsAreBitwiseIdentical) {
  // A race (missing barrier, unfinished copy) shows as run-to-run differences.
  // 4 x 8 heads x 500 keys at d=64 takes the short, key-split kernel.
  for (auto [seqlen, head_dim, causal] : {std::tuple{1500, 128, false}, std::tuple{1500, 128, true},
                                          std::tuple{500, 64, false}, std::tuple{500, 64, true}}) {
    RandomSelfAttention problem(4, 8, seqlen, head_dim, causal);
    const std::size_t elems = problem.elems;
    ForwardParams& params = problem.params;
    DeviceBuffer o1(elems * 2), o2(elems * 2);
    std::vector<std::uint16_t> first(elems), second(elems);
    for (int run = 0; run < 5; ++run) {
      params.o = run == 0 ? o1.data : o2.data;
      kw::attention::forward(params, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      CUDA_OK(
          cudaMemcpy(run == 0 ? first.data() : second.data(), params.o, elems * 2, cudaMemcpyDeviceToHost));
      if (run > 0) {
        ASSERT_EQ(first, second) << "run " << run << (causal ? " causal" : "");
      }
    }
  }
}

TEST_F(AttentionGpuTest, InjectedSpinDelaysTheKernelAndLeavesItsOutputAlone) {
  // The power tests' injected slowdown: the last block of the grid spins,
  // so a many-wave kernel ends later by about the spin, its output as before,
  // and the counter is back at 0 for the next launch.
  RandomSelfAttention problem(4, 16, 2048, 128, false);
  const std::size_t elems = problem.elems;
  ForwardParams& params = problem.params;
  DeviceBuffer o1(elems * 2), o2(elems * 2), counter(4);
  CUDA_OK(cudaMemset(counter.data, 0, 4));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  auto median_ms = [&] {
    std::vector<float> times;
    for (int i = 0; i < 21; ++i) {
      EXPECT_EQ(cudaEventRecord(start), cudaSuccess);
      kw::attention::forward(params, nullptr);
      EXPECT_EQ(cudaEventRecord(stop), cudaSuccess);
      EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      float ms = 0;
      EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
      times.push_back(ms);
    }
    std::nth_element(times.begin(), times.begin() + 10, times.end());
    return times[10];
  };
  params.o = o1.data;
  const float plain_ms = median_ms();
  params.o = o2.data;
  params.spin_counter = static_cast<unsigned int*>(counter.data);
  params.spin_cycles = 20'000'000;  // 10-12 ms at the H100's clocks, many times the kernel
  const float spun_ms = median_ms();
  int clock_khz = 0;
  CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const float spin_ms_at_max_clock = 20'000'000.f / static_cast<float>(clock_khz);
  EXPECT_GT(spun_ms - plain_ms, 0.9f * spin_ms_at_max_clock) << plain_ms << " ms plain, " << spun_ms << " ms";
  EXPECT_LT(spun_ms - plain_ms, 1.6f * spin_ms_at_max_clock) << plain_ms << " ms plain, " << spun_ms << " ms";
  unsigned int left = 1;
  CUDA_OK(cudaMemcpy(&left, counter.data, 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(left, 0u);
  std::vector<std::uint16_t> first(elems), second(elems);
  CUDA_OK(cudaMemcpy(first.data(), o1.data, elems * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(second.data(), o2.data, elems * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, second);
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
}

// The bench's correctness reference is computed once, then read from the
// reference cache: the second run finds the same error without computing it.
TEST_F(AttentionGpuTest, TheBenchComputesACorrectnessReferenceOnceThenTakesItFromTheCache) {
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-references");
  setenv("KWBENCH_REFERENCE_CACHE", dir.c_str(), 1);
  const std::string out = (dir / "correctness.json").string();
  std::vector<nlohmann::json> cases;
  for (int run = 0; run < 2; ++run) {
    kw::testing::CommandResult result =
        kw::testing::run_command({KW_ATTENTION_BENCH, "--stage", "correctness", "--case",
                                  "attention/fp16/d64/b2h4s128", "--json", out});
    ASSERT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(out);
    cases.push_back(nlohmann::json::parse(in)["stage"]["details"]["cases"].at(0));
  }
  unsetenv("KWBENCH_REFERENCE_CACHE");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(cases[0]["details"]["reference"], "computed") << cases[0];
  EXPECT_EQ(cases[1]["details"]["reference"], "cached") << cases[1];
  EXPECT_EQ(cases[0]["status"], "passed");
  EXPECT_EQ(cases[0]["message"], cases[1]["message"]) << "the same inputs against the same reference";
}

// DESIGN.md's incident: a `<=` in the dispatch became `<`, and S = 512 went
// to the streaming kernel. With expectations asked of the dispatch itself
// the launch matched them; against the bench's table it fails.
TEST_F(AttentionGpuTest, LaunchGeometryFailsWhenTheDispatchPicksTheWrongVariant) {
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-dispatch-bug");
  const std::string out = (dir / "launch_geometry.json").string();
  auto launch_geometry = [&](bool with_bug) {
    if (with_bug) setenv("LD_LIBRARY_PATH", KW_ATTENTION_DISPATCH_BUG_DIR, 1);
    kw::testing::CommandResult result =
        kw::testing::run_command({KW_ATTENTION_BENCH, "--stage", "launch_geometry", "--case",
                                  "attention/fp16/d64/b1h1s512,attention/fp16/d64/b1h1s256", "--json", out});
    unsetenv("LD_LIBRARY_PATH");
    std::ifstream in(out);
    return std::pair{result, nlohmann::json::parse(in)};
  };
  auto [good, good_report] = launch_geometry(false);
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_EQ(good_report["stage"]["status"], "passed") << good_report["stage"];

  auto [bad, bad_report] = launch_geometry(true);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  ASSERT_EQ(bad_report["stage"]["status"], "failed") << bad_report["stage"];
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& c : bad_report["stage"]["details"]["cases"]) by_name[c["name"]] = c;
  ASSERT_EQ(by_name.size(), 2u) << bad_report["stage"];
  const nlohmann::json& s512 = by_name.at("attention/fp16/d64/b1h1s512");
  EXPECT_EQ(s512["status"], "failed");
  const std::string message = s512["message"];
  EXPECT_NE(message.find("ForwardTraits<64, 16, 64, *>"), std::string::npos) << message;  // expected
  EXPECT_NE(message.find("ForwardTraits<64, 128, 64,"), std::string::npos) << message;    // launched
  EXPECT_EQ(by_name.at("attention/fp16/d64/b1h1s256")["status"], "passed")
      << "S = 256 is short under either dispatch";
}

TEST_F(AttentionGpuTest, UnsupportedInputsAreRejectedWithTheFieldNamed) {
  DeviceBuffer buffer(1 << 20);
  ForwardParams params;
  params.batch = 1;
  params.heads = 1;
  params.seqlen_q = params.seqlen_k = 16;
  params.head_dim = 96;
  params.q = params.k = params.v = params.o_strides = kw::attention::bhsd(buffer.data, 1, 16, 96);
  params.o = buffer.data;
  params.softmax_scale = 0.1f;
  auto message = [&] {
    try {
      kw::attention::forward(params, nullptr);
    } catch (const kw::attention::UnsupportedError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message().find("head_dim 96 is not supported (64, 128)"), std::string::npos) << message();
  params.head_dim = 64;
  params.q = params.k = params.v = params.o_strides = kw::attention::bhsd(buffer.data, 1, 16, 64);
  params.k.data = static_cast<char*>(buffer.data) + 2;
  EXPECT_NE(message().find("k must be 16-byte aligned"), std::string::npos) << message();
  params.k.data = buffer.data;
  params.softmax_scale = -1.f;
  EXPECT_NE(message().find("softmax_scale"), std::string::npos) << message();
  params.softmax_scale = 0.1f;
  params.seqlen_k = 0;
  EXPECT_NE(message().find("seqlen_k 0 must be at least 1"), std::string::npos) << message();
  params.seqlen_k = 16;
  params.v.row_stride = 60;
  EXPECT_NE(message().find("v.row_stride = 60"), std::string::npos) << message();
  params.v.row_stride = 64;
  EXPECT_EQ(message(), "accepted");
  CUDA_OK(cudaDeviceSynchronize());
}

}  // namespace
