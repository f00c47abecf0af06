// kw-bench-attention: the attention forward kernel against cuDNN's fused SDPA
// and cuBLAS unfused attention, on the user's small shapes and on
// FlashAttention's benchmark shapes (16k tokens, hidden 2048), fp16 and bf16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>

#include "../baselines/cublas_unfused.hpp"
#include "../baselines/cudnn_sdpa.hpp"
#include "../src/reference.hpp"
#include "expected_launches.hpp"
#include "injected_slowdown.hpp"
#include "kw/common/hash.hpp"
#include "kw_attention/attention.hpp"
#include "kwbench/kwbench.hpp"

namespace {

__global__ void spin_cycles_kernel(long long cycles) {
  const long long until = clock64() + cycles;
  while (clock64() < until) {
  }
}

using kw::attention::DType;
using kw::attention::ForwardParams;

struct Shape {
  int batch, heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  DType dtype;
  // Correctness-only: an edge of the masking (Sq != Sk, key ranges a causal
  // mask hides whole) that every dispatch must get right but nobody times.
  bool timed = true;
};

Shape square(int batch, int heads, int seqlen, int head_dim, bool causal, DType dtype) {
  return {batch, heads, seqlen, seqlen, head_dim, causal, dtype};
}

// Query rows compared with the fp32 reference: all of them up to 2^28
// row-keys of reference work, else the first 256 rows of the first head, the
// last 256 of the last head (partial tiles) and random rows up to that budget.
std::vector<std::int64_t> rows_to_check(const Shape& s, std::mt19937_64& rng) {
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seqlen_q;
  const std::int64_t budget = std::max<std::int64_t>(4096, (std::int64_t{1} << 28) / s.seqlen_k);
  std::vector<std::int64_t> out;
  if (rows <= budget) {
    out.resize(static_cast<std::size_t>(rows));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  // Marks rather than a set: the largest shapes pick a quarter of a million rows.
  std::vector<char> picked(static_cast<std::size_t>(rows), 0);
  std::int64_t count = 0;
  auto pick = [&](std::int64_t row) {
    count += picked[static_cast<std::size_t>(row)] == 0;
    picked[static_cast<std::size_t>(row)] = 1;
  };
  for (std::int64_t i = 0; i < std::min<std::int64_t>(256, s.seqlen_q); ++i) {
    pick(i);
    pick(rows - 1 - i);
  }
  std::uniform_int_distribution<std::int64_t> any(0, rows - 1);
  while (count < budget) pick(any(rng));
  out.reserve(static_cast<std::size_t>(budget));
  for (std::int64_t row = 0; row < rows; ++row)
    if (picked[static_cast<std::size_t>(row)]) out.push_back(row);
  return out;
}

class AttentionCase : public kwbench::Case {
 public:
  AttentionCase(std::string group, Shape shape) : group_(std::move(group)), s_(shape) {}

  std::string name() const override {
    return "attention/" + std::string(kw::attention::dtype_name(s_.dtype)) + "/d" +
           std::to_string(s_.head_dim) + "/b" + std::to_string(s_.batch) + "h" + std::to_string(s_.heads) +
           (s_.seqlen_q == s_.seqlen_k
                ? "s" + std::to_string(s_.seqlen_q)
                : "q" + std::to_string(s_.seqlen_q) + "k" + std::to_string(s_.seqlen_k)) +
           (s_.causal ? "/causal" : "");
  }

  nlohmann::json params() const override {
    nlohmann::json out{{"group", group_},         {"dtype", kw::attention::dtype_name(s_.dtype)},
                       {"batch", s_.batch},       {"heads", s_.heads},
                       {"head_dim", s_.head_dim}, {"causal", s_.causal},
                       {"layout", "bhsd"}};
    if (s_.seqlen_q == s_.seqlen_k) {
      out["seqlen"] = s_.seqlen_q;
    } else {
      out["seqlen_q"] = s_.seqlen_q;
      out["seqlen_k"] = s_.seqlen_k;
    }
    return out;
  }

  bool timed() const override { return s_.timed; }

  void setup(kwbench::State& state) override {
    const std::size_t heads = static_cast<std::size_t>(s_.batch) * s_.heads;
    const std::size_t q_elements = heads * s_.seqlen_q * s_.head_dim;
    const std::size_t kv_elements = heads * s_.seqlen_k * s_.head_dim;
    const std::size_t rows = heads * s_.seqlen_q;
    void* q = state.alloc(q_elements * 2);
    void* k = state.alloc(kv_elements * 2);
    void* v = state.alloc(kv_elements * 2);
    for (auto [tensor, elements] : {std::pair{q, q_elements}, {k, kv_elements}, {v, kv_elements}}) {
      // Unit variance: scaled scores then have a spread like a trained model's.
      kw::attention::fill_random(s_.dtype, tensor, elements, std::sqrt(3.f), state.rng()(), state.stream());
    }
    params_.dtype = s_.dtype;
    params_.batch = s_.batch;
    params_.heads = s_.heads;
    params_.seqlen_q = s_.seqlen_q;
    params_.seqlen_k = s_.seqlen_k;
    params_.head_dim = s_.head_dim;
    params_.q = kw::attention::bhsd(q, s_.heads, s_.seqlen_q, s_.head_dim);
    params_.k = kw::attention::bhsd(k, s_.heads, s_.seqlen_k, s_.head_dim);
    params_.v = kw::attention::bhsd(v, s_.heads, s_.seqlen_k, s_.head_dim);
    params_.o_strides = params_.q;
    params_.softmax_scale = 1.f / std::sqrt(static_cast<float>(s_.head_dim));
    params_.causal = s_.causal;

    params_.o = state.alloc(q_elements * 2, "candidate");
    params_.lse = state.alloc_n<float>(rows, "candidate");

    // Baselines are built only when this stage times them: a cuDNN plan and
    // the unfused scores (up to 17 GB) cost more than the candidate's run.
    if (state.wants("baseline:cudnn")) {
      cudnn_params_ = params_;
      cudnn_params_.o = state.alloc(q_elements * 2, "baseline:cudnn");
      cudnn_params_.lse = state.alloc_n<float>(rows, "baseline:cudnn");
      cudnn_ = std::make_unique<kw::attention::CudnnSdpa>(cudnn_params_, state.stream());
      if (cudnn_->unavailable().empty() && cudnn_->workspace_bytes() > 0) {
        cudnn_workspace_ = state.alloc(cudnn_->workspace_bytes(), "baseline:cudnn");
      }
    }
    cublas_unavailable_.clear();
    if (state.wants("baseline:cublas_unfused")) {
      cublas_params_ = params_;
      cublas_params_.o = state.alloc(q_elements * 2, "baseline:cublas_unfused");
      cublas_params_.lse = state.alloc_n<float>(rows, "baseline:cublas_unfused");
      try {
        scores_ =
            state.alloc(kw::attention::CublasUnfused::workspace_bytes(params_), "baseline:cublas_unfused");
        cublas_ = std::make_unique<kw::attention::CublasUnfused>();
      } catch (const std::exception& error) {
        cublas_unavailable_ = std::string("cuBLAS unfused: ") + error.what();
      }
    }
    if (double fraction = injected_slowdown(name()); fraction > 0)
      calibrate_injected_slowdown(state, fraction);
  }

  void teardown(kwbench::State&) override {
    cudnn_.reset();
    cublas_.reset();
    cudnn_workspace_ = scores_ = nullptr;
  }

  void run_candidate(kwbench::State& state) override { kw::attention::forward(params_, state.stream()); }

  // The power tests' "correct change that makes this case slower": the
  // kernel's last block spins, counted in SM cycles at the clock it ran at,
  // so the case runs `fraction` slower at whatever clock the measurement
  // later sees. The spin is sized in a closed loop: time the plain kernel as
  // the harness does (rounds queued back to back, each after an L2 flush),
  // then the slowed one, and rescale the spin by asked / got until they
  // agree within a tenth. Sized open-loop from the plain kernel's time, a
  // tiny case's 10% came out at +3.7% on the H100 (a power job of its
  // series): its timed interval is
  // not all kernel, and the spin only lengthens the kernel.
  void calibrate_injected_slowdown(kwbench::State& state, double fraction) {
    params_.spin_cycles = 0;
    params_.spin_counter = nullptr;
    int device = 0, sms = 0, l2_bytes = 0;
    KW_CUDA_CHECK(cudaGetDevice(&device));
    KW_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    KW_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    const kw::attention::LaunchShape shape = kw::attention::launch_shape(params_);
    if (static_cast<long long>(shape.grid.x) * shape.grid.y * shape.grid.z > sms) {
      params_.spin_counter = state.alloc_n<unsigned int>(1, "candidate");
      KW_CUDA_CHECK(cudaMemsetAsync(params_.spin_counter, 0, sizeof(unsigned int), state.stream()));
    }
    const std::size_t flush_bytes = std::max<std::size_t>(2 * static_cast<std::size_t>(l2_bytes), 8 << 20);
    void* flush = nullptr;  // not a State allocation: no part of the case's footprint
    KW_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    constexpr int kWarmup = 3, kTimed = 25;
    std::vector<cudaEvent_t> events(2 * (kTimed + 1));
    for (cudaEvent_t& event : events) KW_CUDA_CHECK(cudaEventCreate(&event));
    auto elapsed_ns = [&](int i) {
      float ms = 0;
      KW_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
      return 1e6 * static_cast<double>(ms);
    };
    // The median time of the kernel with spin_cycles as set, and the SM
    // cycles per ns right after (a single thread spinning a known count).
    auto time_kernel = [&](double& cycles_per_ns) {
      for (int i = 0; i < kWarmup + kTimed; ++i) {
        KW_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, state.stream()));
        if (i >= kWarmup) KW_CUDA_CHECK(cudaEventRecord(events[2 * (i - kWarmup)], state.stream()));
        run_candidate(state);
        if (i >= kWarmup) KW_CUDA_CHECK(cudaEventRecord(events[2 * (i - kWarmup) + 1], state.stream()));
      }
      constexpr long long kProbeCycles = 1 << 21;
      KW_CUDA_CHECK(cudaEventRecord(events[2 * kTimed], state.stream()));
      spin_cycles_kernel<<<1, 1, 0, state.stream()>>>(kProbeCycles);
      KW_CUDA_CHECK(cudaGetLastError());
      KW_CUDA_CHECK(cudaEventRecord(events[2 * kTimed + 1], state.stream()));
      KW_CUDA_CHECK(cudaStreamSynchronize(state.stream()));
      cycles_per_ns = static_cast<double>(kProbeCycles) / elapsed_ns(kTimed);
      std::vector<double> ns(kTimed);
      for (int i = 0; i < kTimed; ++i) ns[i] = elapsed_ns(i);
      std::nth_element(ns.begin(), ns.begin() + kTimed / 2, ns.end());
      return ns[kTimed / 2];
    };
    double cycles_per_ns = 0;
    const double plain_ns = time_kernel(cycles_per_ns);
    params_.spin_cycles = std::max(1LL, std::llround(fraction * plain_ns * cycles_per_ns));
    double got = 0;
    constexpr int kRounds = 4;
    for (int round = 0; round < kRounds; ++round) {
      got = time_kernel(cycles_per_ns) / plain_ns - 1;
      if (std::abs(got - fraction) <= 0.1 * fraction || round + 1 == kRounds) break;  // `got` is the spin's
      // A spin the timing does not see yet (got <= 0) is doubled.
      const double scale = got > 0 ? std::clamp(fraction / got, 0.25, 4.0) : 2.0;
      params_.spin_cycles = std::max(1LL, std::llround(static_cast<double>(params_.spin_cycles) * scale));
    }
    for (cudaEvent_t event : events) KW_CUDA_CHECK(cudaEventDestroy(event));
    KW_CUDA_CHECK(cudaFree(flush));
    std::fprintf(stderr,
                 "injected slowdown %s: asked %+.1f%%, measured %+.1f%% (plain %.0f ns, spin %lld cycles)\n",
                 name().c_str(), 100 * fraction, 100 * got, plain_ns, params_.spin_cycles);
  }

  std::vector<std::string> baselines() const override { return {"cudnn", "cublas_unfused"}; }
  std::string baseline_unavailable(const std::string& baseline) const override {
    if (baseline == "cudnn") return cudnn_ ? cudnn_->unavailable() : "not set up: not timed in this stage";
    if (!cublas_ && cublas_unavailable_.empty()) return "not set up: not timed in this stage";
    return cublas_unavailable_;
  }
  void run_baseline(const std::string& baseline, kwbench::State& state) override {
    if (baseline == "cudnn") {
      cudnn_->run(cudnn_workspace_);
    } else if (baseline == "cublas_unfused") {
      cublas_->run(cublas_params_, scores_, state.stream());
    } else {
      throw kwbench::Error("attention bench: no baseline \"" + baseline + "\"");
    }
  }

  void poison_output(kwbench::State& state) override {
    const std::size_t rows = static_cast<std::size_t>(s_.batch) * s_.heads * s_.seqlen_q;
    kwbench::fill_nan(state, params_.o, rows * s_.head_dim * 2);
    kwbench::fill_nan(state, params_.lse, rows * sizeof(float));
  }

  // The fp32 reference of the checked rows on the device: O (rows x
  // head_dim), then the LSE (rows). Cached by what it depends on: the
  // reference and input code (a hash of their sources, taken at configure
  // time), the inputs' seed, the shape and the rows.
  const float* reference(kwbench::State& state, const std::vector<std::int64_t>& rows,
                         const std::int64_t* rows_device, bool& from_cache) {
    const std::uint64_t rows_hash = kw::common::fnv1a64(
        std::string_view(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(std::int64_t)));
    const std::string key = std::string("attention reference ") + KW_ATTENTION_REFERENCE_SOURCES + " " +
                            name() + " seed " + std::to_string(state.seed()) + " rows " +
                            std::to_string(rows.size()) + ":" + std::to_string(rows_hash);
    const std::size_t values = rows.size() * (s_.head_dim + 1);
    auto* expected = state.alloc_n<float>(values, "reference");
    if (auto cached = kwbench::ReferenceCache::instance().load(key); cached && cached->size() == values) {
      KW_CUDA_CHECK(cudaMemcpyAsync(expected, cached->data(), values * sizeof(float), cudaMemcpyHostToDevice,
                                    state.stream()));
      KW_CUDA_CHECK(cudaStreamSynchronize(state.stream()));  // before `cached` goes
      from_cache = true;
      return expected;
    }
    kw::attention::reference_rows(params_, rows_device, static_cast<int>(rows.size()), expected,
                                  expected + rows.size() * s_.head_dim, state.stream());
    std::vector<float> computed(values);
    KW_CUDA_CHECK(cudaMemcpyAsync(computed.data(), expected, values * sizeof(float), cudaMemcpyDeviceToHost,
                                  state.stream()));
    KW_CUDA_CHECK(cudaStreamSynchronize(state.stream()));
    kwbench::ReferenceCache::instance().store(key, computed);
    from_cache = false;
    return expected;
  }

  // Compared on the device: the outputs of the largest shapes are tens of
  // millions of values, which the host took most of a second to convert
  // and compare.
  kwbench::Accuracy check(kwbench::State& state) override {
    const std::vector<std::int64_t> rows = rows_to_check(s_, state.rng());
    auto* rows_device = state.alloc_n<std::int64_t>(rows.size(), "reference");
    KW_CUDA_CHECK(cudaMemcpyAsync(rows_device, rows.data(), rows.size() * sizeof(std::int64_t),
                                  cudaMemcpyHostToDevice, state.stream()));
    kwbench::Accuracy accuracy;
    const float* expected = reference(state, rows, rows_device, accuracy.reference_from_cache);
    const kw::attention::OutputErrors errors =
        kw::attention::compare_rows(params_, rows_device, static_cast<int>(rows.size()), expected,
                                    expected + rows.size() * s_.head_dim, state.stream());
    accuracy.nonfinite = static_cast<std::int64_t>(errors.nonfinite);
    accuracy.max_abs_err = errors.max_abs;
    // One figure for both outputs: the larger relative error of O and of the LSE.
    accuracy.rel_l2_err =
        std::max(errors.norm_sq > 0 ? std::sqrt(errors.error_sq / errors.norm_sq) : 0.0,
                 errors.lse_norm_sq > 0 ? std::sqrt(errors.lse_error_sq / errors.lse_norm_sq) : 0.0);
    return accuracy;
  }

  double tolerance() const override { return s_.dtype == DType::fp16 ? 2e-3 : 1e-2; }

  kwbench::ExpectedLaunch expected_launch() const override {
    return kw::attention::expected::launch_for({name(), s_.dtype == DType::fp16 ? "__half" : "__nv_bfloat16",
                                                s_.batch, s_.heads, s_.seqlen_q, s_.causal});
  }

  // Catches the "expected 1.7x, measured 0.12x" class: far slower than cuDNN
  // on the same inputs, or implausibly faster (work skipped).
  kwbench::SanityRange sanity() const override { return {"cudnn", 0.25, 8.0, 0}; }

  double flops() const override {
    const double full =
        4.0 * s_.batch * s_.heads * static_cast<double>(s_.seqlen_q) * s_.seqlen_k * s_.head_dim;
    return s_.causal ? full / 2 : full;
  }
  double bytes() const override {
    const double heads = static_cast<double>(s_.batch) * s_.heads;
    return heads * (2.0 * s_.seqlen_q + 2.0 * s_.seqlen_k) * s_.head_dim * 2 + heads * s_.seqlen_q * 4;
  }

 private:
  std::string group_;
  Shape s_;
  ForwardParams params_, cudnn_params_, cublas_params_;
  std::unique_ptr<kw::attention::CudnnSdpa> cudnn_;
  void* cudnn_workspace_ = nullptr;
  std::unique_ptr<kw::attention::CublasUnfused> cublas_;
  std::string cublas_unavailable_;
  void* scores_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  auto& registry = kwbench::Registry::instance();
  auto add = [&](const std::string& group, Shape shape) {
    registry.add_case([group, shape] { return std::make_unique<AttentionCase>(group, shape); });
  };
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (bool causal : {false, true}) {
      for (int seqlen : {32, 64, 128, 256, 512}) add("user", square(1, 1, seqlen, 64, causal, dtype));
      add("user", square(2, 4, 128, 64, causal, dtype));
      for (int head_dim : {64, 128}) {
        for (int seqlen = 512; seqlen <= 16384; seqlen *= 2) {
          add("flash-attention", square(16384 / seqlen, 2048 / head_dim, seqlen, head_dim, causal, dtype));
        }
      }
    }
    // The masking's edges, for correctness only. With the causal mask
    // aligned top-left, Sq < Sk leaves most keys hidden from every row: the
    // short kernel's warps, which split the keys, then hold key ranges that
    // are masked whole and must keep their rows' maxima at -inf without
    // producing NaN. Sq > Sk, partial tiles (17 x 300), and the streaming
    // kernels with Sq != Sk besides.
    for (bool causal : {false, true}) {
      for (auto [seqlen_q, seqlen_k, head_dim] : {std::tuple{64, 512, 64},
                                                  {1, 512, 64},
                                                  {17, 300, 64},
                                                  {512, 128, 64},
                                                  {64, 1024, 64},
                                                  {64, 512, 128}}) {
        add("masking", {1, 1, seqlen_q, seqlen_k, head_dim, causal, dtype, false});
      }
    }
  }
  for (const kw::attention::KernelEntry& kernel : kw::attention::kernels()) {
    registry.add_kernel(
        {kernel.name, kernel.function, kernel.block_threads, kernel.dynamic_smem, kernel.configure});
  }
  return kwbench::main(argc, argv);
}
