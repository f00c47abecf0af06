#include "kw/common/judge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kw/common/stats.hpp"

namespace kw::common {

RunHistory CaseHistory::through(std::int64_t run_id) const {
  RunHistory out;
  for (std::size_t i = 0; i < run_ids.size(); ++i) {
    if (run_ids[i] > run_id) continue;
    out.locations.push_back(locations[i]);
    out.clocks.push_back(clocks[i]);
  }
  return out;
}

std::vector<double> CaseHistory::at_clock(const DetectionSettings& settings) const {
  for (auto clock = clocks.rbegin(); clock != clocks.rend(); ++clock) {
    if (clock->mhz > 0)
      return history_at_clock(locations, clocks, {clock->mhz, 0, 0, 0}, settings).locations_ns;
  }
  return locations;
}

GpuNoise learn_gpu_noise(const std::map<std::string, CaseHistory>& histories,
                         const DetectionSettings& settings) {
  GpuNoise noise;
  std::vector<double> sds;
  std::vector<std::int64_t> counts;
  std::vector<double> scales;
  double errors = 0;
  for (const auto& [_, h] : histories) {
    sds.insert(sds.end(), h.replicate_sds.begin(), h.replicate_sds.end());
    counts.insert(counts.end(), h.replicate_counts.begin(), h.replicate_counts.end());
    if (auto forecast = forecast_level(h.at_clock(settings), settings)) {
      scales.push_back(forecast->typical_scale);
      errors += static_cast<double>(forecast->errors);
    }
  }
  noise.replicate = pool_replicate_sds(sds, counts);
  if (!scales.empty()) {
    std::nth_element(scales.begin(), scales.begin() + static_cast<std::ptrdiff_t>(scales.size() / 2),
                     scales.end());
    noise.run = {scales[scales.size() / 2], errors};
  }
  return noise;
}

NoiseModel case_noise(const CaseHistory& history, const GpuNoise& gpu, const DetectionSettings& settings) {
  NoiseModel defaults = default_noise(), model = defaults;
  PooledSd gpu_replicate = gpu.replicate.df > 0 ? gpu.replicate : PooledSd{defaults.replicate_sd, 0};
  PooledSd own = pool_replicate_sds(history.replicate_sds, history.replicate_counts);
  PooledSd replicate = shrink(own, gpu_replicate.sd, settings.prior_df);
  model.replicate_sd = replicate.sd;
  model.replicate_df = own.df + gpu_replicate.df > 0 ? replicate.df : 0;
  if (gpu.run.df > 0) {
    model.run_sd = gpu.run.sd;
    model.run_df = gpu.run.df;
  }
  return model;
}

namespace {

double throttled_share(const Measurement& m) {
  return m.samples_ns.empty()
             ? 0
             : static_cast<double>(m.throttled_samples.size()) / static_cast<double>(m.samples_ns.size());
}

// Why a measured comparison is not judged, when the GPU braked through most
// of a side's samples; empty when it is judged.
std::string brake_reason(const Case* head_case, const Measurement& head, const Measurement* in_job_base) {
  const bool braking =
      head_case && head_case->gpu_state && (head_case->gpu_state->throttle_reasons & kBrakeReasons) != 0;
  const double head_braked = throttled_share(head);
  const double base_braked = in_job_base ? throttled_share(*in_job_base) : 0;
  if (!braking || std::max(head_braked, base_braked) <= kMostlyThrottled) return {};
  char why[240];
  std::snprintf(why, sizeof(why),
                "not judged: %.0f%% of the head's samples%s were taken while the GPU braked (thermal or "
                "hardware slowdown); a comparison of them would be the GPU's, not the code's",
                100 * head_braked,
                in_job_base
                    ? (" and " + std::to_string(std::lround(100 * base_braked)) + "% of the base's").c_str()
                    : "");
  return why;
}

}  // namespace

Comparison judge_time(const std::string& case_name, const Case* head_case, const Measurement& head,
                      ComparedWith with, const NoiseModel& noise, double min_threshold,
                      const DetectionSettings& settings) {
  Comparison row;
  row.case_name = case_name;
  row.impl = head.impl;
  row.min_threshold = min_threshold;
  row.excluded_throttled = head.throttled_samples.size();
  row.in_job = with.in_job_base != nullptr;
  const NoiseModel judged_noise = noise_for(noise, head.replicate_location);
  const Timing head_timing = timing_of(head);
  auto test_with = [&](std::optional<std::int64_t> before) {
    std::vector<double> h = replicate_locations(head_timing, settings, before);
    if (with.in_job_base) {
      const Timing base_timing = timing_of(*with.in_job_base);
      return test_ab(h, replicate_locations(base_timing, settings, before), judged_noise, settings,
                     replicate_clocks(head_timing, before), replicate_clocks(base_timing, before));
    }
    return test_history(h, with.history.locations, judged_noise, settings,
                        replicate_clocks(head_timing, before), with.history.clocks);
  };
  if (with.in_job_base) {
    row.test = test_with(std::nullopt);
    row.ratio_of_medians = head.median_ns / with.in_job_base->median_ns;
  } else if (with.baseline_run && with.stored_base) {
    if (with.history.locations.empty()) {
      with.history.locations.push_back(location(timing_of(*with.stored_base), settings));
      with.history.clocks.emplace_back();
    }
    row.test = test_with(std::nullopt);
    row.ratio_of_medians = head.median_ns / with.stored_base->median_ns;
  } else {
    row.test.head_replicates = replicate_locations(head_timing, settings).size();
    row.test.note = with.baseline_run ? "the baseline run has no " + head.impl + " measurement for this case"
                                      : "no baseline run";
  }
  if (std::string braked = row.measured() ? brake_reason(head_case, head, with.in_job_base) : "";
      !braked.empty()) {
    CaseTest unjudged;
    unjudged.head_replicates = row.test.head_replicates;
    unjudged.note = braked;
    row.test = unjudged;
    row.throttled_out = true;
  } else if (row.excluded_throttled > 0) {
    row.test.note += (row.test.note.empty() ? "" : "; ") + std::to_string(row.excluded_throttled) +
                     " sample(s) taken while throttled were left out of the replicate locations";
  }
  // The status of the first pass is only indicative: the decision is the
  // run's, over all replicates.
  if (head_case && head_case->first_pass_replicates && row.measured())
    row.first_pass = test_with(*head_case->first_pass_replicates);
  return row;
}

NoiseModel energy_noise(const DetectionSettings& settings) {
  NoiseModel noise;
  noise.replicate_sd = settings.energy_sd;
  noise.run_sd = settings.energy_sd;
  noise.clock_adjusted_sd = settings.energy_sd;
  noise.side_offset_ns = 0;  // a time, not an energy
  return noise;
}

std::optional<Comparison> judge_energy(const std::string& case_name, const Measurement& head,
                                       const Measurement* in_job_base, const Measurement* stored_base,
                                       double min_threshold, const DetectionSettings& settings) {
  if (head.energy_j.empty() || head.samples_ns.empty() || median(head.samples_ns) < kMinEnergyKernelNs)
    return std::nullopt;
  const Measurement* base = in_job_base ? in_job_base : stored_base;
  if (base == nullptr || base->energy_j.empty()) return std::nullopt;
  Comparison row;
  row.case_name = case_name;
  row.kind = "energy";
  row.impl = "candidate";
  row.min_threshold = min_threshold;
  row.in_job = in_job_base != nullptr;
  if (in_job_base) {
    row.test = test_ab(head.energy_j, in_job_base->energy_j, energy_noise(settings), settings);
  } else {
    const double stored = location(base->energy_j);
    row.test = test_history(head.energy_j, std::vector<double>{stored}, energy_noise(settings), settings);
  }
  row.ratio_of_medians = median(head.energy_j) / median(base->energy_j);
  row.test.note = "joules per iteration: " + row.test.note;
  return row;
}

namespace {

std::optional<MachineDrift> machine_drift(const std::vector<Comparison*>& comparisons,
                                          const DetectionSettings& settings) {
  std::vector<double> effects;
  for (const Comparison* c : comparisons) {
    if (!c->candidate() && c->measured()) effects.push_back(c->test.effect);
  }
  if (effects.empty()) return std::nullopt;
  auto middle = effects.begin() + static_cast<std::ptrdiff_t>(effects.size() / 2);
  std::nth_element(effects.begin(), middle, effects.end());
  MachineDrift drift;
  drift.median_change = std::expm1(*middle);
  drift.comparisons = effects.size();
  for (double e : effects) drift.same_direction += (e > 0) == (*middle > 0);
  drift.flagged = std::abs(drift.median_change) > 0.5 * settings.min_threshold &&
                  drift.same_direction * 4 >= effects.size() * 3;
  return drift;
}

}  // namespace

RunDecision decide_run(const std::vector<Comparison*>& comparisons, const DetectionSettings& settings) {
  RunDecision run;
  for (bool candidates : {true, false}) {
    std::vector<CaseTest> tests;
    std::vector<double> thresholds;
    std::vector<Comparison*> members;
    for (Comparison* c : comparisons) {
      if (c->candidate() != candidates) continue;
      tests.push_back(c->test);
      thresholds.push_back(c->min_threshold);
      members.push_back(c);
    }
    const Decision decision = decide(tests, thresholds, settings);
    const auto judged = static_cast<std::size_t>(std::count_if(
        tests.begin(), tests.end(), [](const CaseTest& t) { return t.method != CaseTest::Method::none; }));
    for (std::size_t i = 0; i < members.size(); ++i) {
      members[i]->status = decision.statuses[i];
      if (candidates) members[i]->detectable = detectable_change(tests[i], thresholds[i], judged, settings);
      if (const std::optional<double> sees = members[i]->detectable;
          sees && *sees > thresholds[i] && members[i]->kind == "time" &&
          decision.statuses[i] != ChangeStatus::regression &&
          decision.statuses[i] != ChangeStatus::improvement) {
        // What the gate can promise here, said where the case is read.
        char blind[200];
        std::snprintf(
            blind, sizeof(blind),
            "sees slowdowns of %.1f%% or more nine times in ten, above its %g%% threshold: %.1f%% is "
            "what it can defend with this run's replicates",
            100 * *sees, 100 * thresholds[i], 100 * *sees);
        std::string& note = members[i]->test.note;
        note += (note.empty() ? "" : "; ") + std::string(blind);
      }
      if (decision.statuses[i] != ChangeStatus::inconclusive) continue;
      // The estimate alone says changed; the evidence does not, or not among the run's comparisons.
      char why[200];
      if (decision.held_back[i]) {
        std::snprintf(
            why, sizeof(why),
            "inconclusive: its interval alone excludes 1 (p = %.1e), not enough among the run's %zu "
            "comparisons (Holm at %g%%)",
            tests[i].p_value, members.size(), 100 * settings.run_alpha);
      } else if (std::abs(tests[i].effect) > std::log1p(thresholds[i])) {
        std::snprintf(
            why, sizeof(why),
            "inconclusive: moved %+.1f%%, past its %g%% threshold, but its interval holds no change "
            "(p = %.1e); more replicates decide it",
            100 * std::expm1(tests[i].effect), 100 * thresholds[i], tests[i].p_value);
      } else {
        std::snprintf(why, sizeof(why),
                      "inconclusive: its interval reaches past %g%%, %g times its threshold; more replicates "
                      "decide it",
                      100 * settings.resolution * thresholds[i], settings.resolution);
      }
      std::string& note = members[i]->test.note;
      note += (note.empty() ? "" : "; ") + std::string(why);
    }
    if (!candidates) continue;
    run.regression = decision.regression;
    run.improvement = decision.improvement;
    for (const CaseTest& t : tests) run.candidate_comparisons += t.method != CaseTest::Method::none;
  }
  run.machine_drift = machine_drift(comparisons, settings);
  return run;
}

namespace {

CandidateSummary summarize_candidate(const Measurement& candidate, const DetectionSettings& settings) {
  const Timing timing = timing_of(candidate);
  const std::vector<double> per_replicate = replicate_locations(timing, settings);
  CandidateSummary summary;
  summary.location = location(per_replicate);
  summary.replicates = static_cast<std::int64_t>(per_replicate.size());
  summary.replicate_sd = replicate_log_sd(per_replicate);
  summary.clock = run_clock(per_replicate, replicate_clocks(timing));
  double log_sum = 0;
  int measured = 0;
  for (double joules : candidate.energy_j) {
    if (joules <= 0) continue;
    log_sum += std::log(joules);
    ++measured;
  }
  if (measured > 0) summary.energy_j = std::exp(log_sum / measured);
  if (!candidate.power_w.empty()) summary.power_w = median(candidate.power_w);
  return summary;
}

}  // namespace

CaseSummary summarize_case(const Case& c, const DetectionSettings& settings) {
  CaseSummary summary;
  for (const Measurement& m : c.measurements) {
    summary.medians.emplace_back(m.impl, m.median_ns);
    summary.bands.emplace_back(m.impl, median_interval(m.samples_ns, 0.95));
  }
  if (const Measurement* candidate = c.candidate())
    summary.candidate = summarize_candidate(*candidate, settings);
  return summary;
}

std::string inconclusive_gate_text(const nlohmann::json& detection) {
  if (!detection.is_object() || !detection.contains("inconclusive_gate")) return "";
  const nlohmann::json& gate = detection["inconclusive_gate"];
  const nlohmann::json& cases = gate.value("cases", nlohmann::json::array());
  if (cases.empty()) return "";
  const nlohmann::json* worst = &cases[0];
  for (const nlohmann::json& c : cases)
    if (c.value("ratio", 1.0) > worst->value("ratio", 1.0)) worst = &c;
  char detail[256];
  std::snprintf(
      detail, sizeof detail,
      "%zu case(s) slower by %g times their threshold or more, unproven (worst %s %.3fx, threshold %g%%)",
      cases.size(), gate.value("factor", 3.0), worst->value("case", std::string("?")).c_str(),
      worst->value("ratio", 1.0), 100 * worst->value("threshold", 0.0));
  const std::string applied = gate.value("applied", std::string("none"));
  if (applied == "no-verdict") return std::string("no verdict: ") + detail + "; measure again";
  if (applied == "fail") return std::string("failed by the project's inconclusive_gate: ") + detail;
  return std::string(detail) + (applied == "pass" ? "; passed by the project's inconclusive_gate" : "");
}

}  // namespace kw::common
