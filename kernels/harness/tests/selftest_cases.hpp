// The scale case: y = a * x over n floats, candidate kernel selectable, with
// device-to-device memcpy (the same bytes moved) as the in-run baseline.
#pragma once

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kwbench/kwbench.hpp"
#include "scale_kernels.cuh"

namespace kwbench_selftest {

class ScaleCase : public kwbench::Case {
 public:
  ScaleCase(std::string name, std::size_t n, Variant variant)
      : name_(std::move(name)), n_(n), variant_(variant) {}

  std::string name() const override { return name_; }
  nlohmann::json params() const override { return {{"n", n_}, {"dtype", "fp32"}}; }

  void setup(kwbench::State& state) override {
    x_ = state.alloc_n<float>(n_);
    y_ = state.alloc_n<float>(n_, "candidate");
    copy_ = state.alloc_n<float>(n_, "baseline:memcpy");
    kwbench::fill_uniform(state, x_, n_, 0.0f, 1.0f);
  }

  void run_candidate(kwbench::State& state) override {
    launch_scale(variant_, x_, y_, a_, n_, state.stream());
    KW_CUDA_CHECK_LAUNCH();
  }

  std::vector<std::string> baselines() const override { return {"memcpy"}; }
  void run_baseline(const std::string&, kwbench::State& state) override {  // its one: memcpy
    KW_CUDA_CHECK(cudaMemcpyAsync(copy_, x_, n_ * sizeof(float), cudaMemcpyDeviceToDevice, state.stream()));
  }

  void poison_output(kwbench::State& state) override { kwbench::fill_nan(state, y_, n_ * sizeof(float)); }

  kwbench::Accuracy check(kwbench::State& state) override {
    auto* sums = state.alloc_n<ScaleErrors>(1, "check");
    KW_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(ScaleErrors), state.stream()));
    scale_errors_kernel<<<132 * 8, 256, 0, state.stream()>>>(x_, y_, a_, n_, sums);
    KW_CUDA_CHECK_LAUNCH();
    ScaleErrors host{};
    KW_CUDA_CHECK(cudaMemcpyAsync(&host, sums, sizeof(host), cudaMemcpyDeviceToHost, state.stream()));
    KW_CUDA_CHECK(cudaStreamSynchronize(state.stream()));
    kwbench::Accuracy accuracy;
    accuracy.nonfinite = static_cast<std::int64_t>(host.nonfinite);
    std::memcpy(&accuracy.max_abs_err, &host.max_abs_bits, sizeof(double));
    accuracy.rel_l2_err = host.norm_sq > 0 ? std::sqrt(host.error_sq / host.norm_sq) : 0;
    return accuracy;
  }

  double tolerance() const override { return 1e-6; }
  kwbench::ExpectedLaunch expected_launch() const override {
    return {"kwbench_selftest::scale*", {384, 1, 1}, std::nullopt, 64, 0};
  }
  kwbench::SanityRange sanity() const override { return {"memcpy", 0.5, 4.0, 0}; }
  double bytes() const override { return 2.0 * static_cast<double>(n_) * sizeof(float); }
  double flops() const override { return static_cast<double>(n_); }

 private:
  std::string name_;
  std::size_t n_;
  Variant variant_;
  float a_ = 1.5f;
  float* x_ = nullptr;
  float* y_ = nullptr;
  float* copy_ = nullptr;
};

}  // namespace kwbench_selftest
