// full_bench: one replicate of a case, its warm-up, timed rounds and
// energy per iteration.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <sstream>

#include "case_run.hpp"
#include "clock_probe.hpp"
#include "kw/common/stats.hpp"
#include "nvml.hpp"

namespace kwbench {

using namespace case_run;

namespace {

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

}  // namespace

CaseOutcome run_full_bench(Case& c, const DeviceFacts& device, const BenchOptions& options) {
  FullBench bench(c, device, options);
  bench.warm_up();
  bench.sample();
  return bench.outcome();
}

}  // namespace kwbench
