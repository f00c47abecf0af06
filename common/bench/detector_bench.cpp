// kw-detector-bench: kernelwatch's detection rule (common/detection, exactly
// what kw-server and the agent run) replayed on an empirical noise model
// measured on a GPU (tools/noise_model.py over the series of
// tools/detection-series.sh): every replicate location is the case's
// level moved by a residual resampled from that case's own measurements, so
// the tails are the GPU's, not a normal model's.
//
// Per scenario it reports run-level false verdicts (a run of N unchanged
// cases flagged anywhere) beside per-comparison rates, and the detection of a
// slowdown in one large case:
//  - pr: base and head measured alternately in one job (k replicates each,
//    plus the confirmation of screened cases), as the agent does;
// The slowed case rotates over the model's large cases (D=128, S >= 2048),
// so detection is their average, with each case's own rate beside it.
//  - main: the head against a 30-run history, run levels resampled from the
//    case's run residuals; where the model has runs with clocks, (level,
//    clock) run pairs and (time, clock) replicate pairs, judged at equal
//    clock as kw-server does.
// On the main scenario two reference rules see the same run locations:
//  - Conbench lookback z-score: |x - mean| / sd over the history > 5;
//  - Bencher t-test threshold: x > mean + t_{0.99, n-1} sd.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"

namespace {

using namespace kw::common;
using nlohmann::json;

struct CaseModel {
  std::string name;
  double level_ns = 0;
  double between_sd = 0, ab_between_sd = 0, run_sd = 0;
  std::vector<double> replicate_residuals, ab_replicate_residuals, run_residuals;
  // A/B replicates with their SM clock: (log time, log clock) residual pairs.
  std::vector<std::pair<double, double>> ab_clock_residuals;
  // Runs of one build with their clock: (log level, log clock) residual
  // pairs, and the sd of the level at equal clock.
  std::vector<std::pair<double, double>> run_clock_residuals;
  double run_clock_sd = 0;
};

struct Model {
  std::string device;
  std::vector<CaseModel> cases;
  // The GPU model's between-run sd as kw-server learns it (learn_gpu_noise):
  // the median case's, one for every case.
  double gpu_run_sd = 0, gpu_run_clock_sd = 0;
};

Model load_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the noise model " + path);
  json document = json::parse(in);
  Model model;
  model.device = document.at("device");
  for (const json& c : document.at("cases")) {
    CaseModel m;
    m.name = c.at("name");
    m.level_ns = c.at("level_ns");
    m.between_sd = c.at("between_sd");
    m.ab_between_sd = c.at("ab_between_sd");
    m.run_sd = c.at("run_sd");
    m.replicate_residuals = c.at("replicate_residuals").get<std::vector<double>>();
    m.ab_replicate_residuals = c.at("ab_replicate_residuals").get<std::vector<double>>();
    m.run_residuals = c.at("run_residuals").get<std::vector<double>>();
    if (c.contains("ab_clock_residuals"))
      m.ab_clock_residuals = c["ab_clock_residuals"].get<std::vector<std::pair<double, double>>>();
    if (c.contains("run_clock_residuals") && !m.ab_clock_residuals.empty()) {
      m.run_clock_residuals = c["run_clock_residuals"].get<std::vector<std::pair<double, double>>>();
      m.run_clock_sd = c.at("run_clock_sd");
    }
    if (m.replicate_residuals.empty() || m.ab_replicate_residuals.empty() || m.run_residuals.size() < 2)
      throw std::runtime_error("noise model: case " + m.name + " has too few residuals");
    model.cases.push_back(std::move(m));
  }
  if (model.cases.empty()) throw std::runtime_error("noise model: no cases");
  std::vector<double> run_sds, run_clock_sds;
  for (const CaseModel& c : model.cases) {
    run_sds.push_back(c.run_sd);
    if (!c.run_clock_residuals.empty()) run_clock_sds.push_back(c.run_clock_sd);
  }
  model.gpu_run_sd = median(run_sds);
  model.gpu_run_clock_sd = run_clock_sds.empty() ? 0 : median(run_clock_sds);
  return model;
}

double draw(const std::vector<double>& residuals, std::mt19937_64& rng) {
  return residuals[std::uniform_int_distribution<std::size_t>(0, residuals.size() - 1)(rng)];
}

// The centre of drawn replicate residuals as a run's location takes it
// (outliers left out): centring on it makes the run's location its drawn
// level, where centring on the plain mean would move every other replicate
// by a share of an outlier that location() then leaves out.
double kept_centre(const std::vector<double>& residuals) {
  std::vector<double> values;
  for (double r : residuals) values.push_back(std::exp(r));
  return std::log(location(values));
}

// A main run's replicate locations: the run's level (a run residual, which
// already holds the mean of its replicates' noise) and centred replicate
// residuals around it.
std::vector<double> main_run(const CaseModel& c, double shift, int k, std::mt19937_64& rng) {
  std::vector<double> r;
  for (int i = 0; i < k; ++i) r.push_back(draw(c.replicate_residuals, rng));
  const double centre = kept_centre(r);
  double level = c.level_ns * (1 + shift) * std::exp(draw(c.run_residuals, rng));
  std::vector<double> out;
  for (double x : r) out.push_back(level * std::exp(x - centre));
  return out;
}

// A main run with clocks: the run's (level, clock) pair, its replicates'
// (time, clock) pairs centred around it.
struct ClockedRun {
  std::vector<double> locations, clocks;
};
ClockedRun main_run_with_clocks(const CaseModel& c, double shift, int k, std::mt19937_64& rng) {
  auto pick = [&](const std::vector<std::pair<double, double>>& pairs) {
    return pairs[std::uniform_int_distribution<std::size_t>(0, pairs.size() - 1)(rng)];
  };
  std::vector<std::pair<double, double>> r;
  std::vector<double> times;
  double clock_mean = 0;
  for (int i = 0; i < k; ++i) {
    r.push_back(pick(c.ab_clock_residuals));
    times.push_back(r.back().first);
    clock_mean += r.back().second / k;
  }
  const double time_centre = kept_centre(times);
  const auto [level, clock] = pick(c.run_clock_residuals);
  ClockedRun run;
  for (const auto& [time, mhz] : r) {
    run.locations.push_back(c.level_ns * (1 + shift) * std::exp(level + time - time_centre));
    run.clocks.push_back(1800 * std::exp(clock + mhz - clock_mean));
  }
  return run;
}

double geometric_mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += std::log(v);
  return std::exp(sum / static_cast<double>(values.size()));
}

// What kw-server learns after many runs of the model's cases
// (case_noise): the case's own replicate spread, and the GPU model's
// between-run sd, not the case's. Giving each case its own run sd here hid
// that a tiny case, twice as noisy as the median one, was judged with the
// median's spread on the server.
NoiseModel learned(const Model& model, const CaseModel& c, bool ab, bool clocks) {
  NoiseModel noise;
  noise.replicate_sd = ab ? c.ab_between_sd : c.between_sd;
  noise.replicate_df = 100;
  noise.run_sd = clocks ? model.gpu_run_clock_sd : model.gpu_run_sd;
  noise.run_df = 100;
  return noise;
}

struct Settings {
  int cases_per_run = 76;
  int replicates = 4;
  int confirm = 4;
  int history = 30;
  int trials = 2000;
  bool learned_noise = true;
  bool clocks = true;  // compare at equal clock where the model has clocks
};

struct Tally {
  int runs = 0, false_runs = 0, comparisons = 0, false_comparisons = 0, detected = 0, confirmed = 0;
  json to_json() const {
    json out{{"runs", runs},
             {"run_false_verdict_rate", runs ? static_cast<double>(false_runs) / runs : 0},
             {"comparisons", comparisons},
             {"comparison_false_flag_rate",
              comparisons ? static_cast<double>(false_comparisons) / comparisons : 0}};
    if (detected >= 0) out["detection_rate"] = runs ? static_cast<double>(detected) / runs : 0;
    out["confirmation_passes_per_run"] = runs ? static_cast<double>(confirmed) / runs : 0;
    return out;
  }
};

// A run's decision: the slowed case detected or not, a flag on any other a
// false one.
void count_decision(const Decision& decision, std::size_t target, Tally& tally) {
  bool any_false = false;
  for (std::size_t i = 0; i < decision.statuses.size(); ++i) {
    bool flagged =
        decision.statuses[i] == ChangeStatus::regression || decision.statuses[i] == ChangeStatus::improvement;
    if (i == target) {
      tally.detected += decision.statuses[i] == ChangeStatus::regression;
      continue;
    }
    ++tally.comparisons;
    tally.false_comparisons += flagged;
    any_false = any_false || flagged;
  }
  ++tally.runs;
  tally.false_runs += any_false;
}

// One simulated run of `settings.cases_per_run` cases; `target` (an index)
// is slowed by `shift`. Counts flags on the others as false.
// `judged`: where given, the run's tests as decided.
void pr_run(const Model& model, const Settings& s, std::size_t target, double shift, std::mt19937_64& rng,
            Tally& tally, std::vector<CaseTest>* judged = nullptr) {
  DetectionSettings detection;
  std::vector<CaseTest> tests;
  std::vector<double> thresholds;
  for (int i = 0; i < s.cases_per_run; ++i) {
    const CaseModel& c = model.cases[static_cast<std::size_t>(i) % model.cases.size()];
    double slow = static_cast<std::size_t>(i) == target ? shift : 0;
    NoiseModel noise = s.learned_noise ? learned(model, c, true, false) : default_noise();
    // Replicates of one side: with clocks where the model has them (the
    // test then compares at equal clock, as on real reports).
    struct Side {
      std::vector<double> locations, clocks;
    } head, base;
    auto measure = [&](Side& side, double level, int k) {
      for (int r = 0; r < k; ++r) {
        if (s.clocks && !c.ab_clock_residuals.empty()) {
          const auto& [time, clock] = c.ab_clock_residuals[std::uniform_int_distribution<std::size_t>(
              0, c.ab_clock_residuals.size() - 1)(rng)];
          side.locations.push_back(level * std::exp(time));
          side.clocks.push_back(1800 * std::exp(clock));
        } else {
          side.locations.push_back(level * std::exp(draw(c.ab_replicate_residuals, rng)));
        }
      }
    };
    measure(head, c.level_ns * (1 + slow), s.replicates);
    measure(base, c.level_ns, s.replicates);
    CaseTest test = test_ab(head.locations, base.locations, noise, detection, head.clocks, base.clocks);
    if (needs_confirmation(test, detection.min_threshold, detection)) {
      ++tally.confirmed;
      measure(head, c.level_ns * (1 + slow), s.confirm);
      measure(base, c.level_ns, s.confirm);
      test = test_ab(head.locations, base.locations, noise, detection, head.clocks, base.clocks);
    }
    tests.push_back(test);
    thresholds.push_back(detection.min_threshold);
  }
  count_decision(decide(tests, thresholds, detection), target, tally);
  if (judged != nullptr) *judged = std::move(tests);
}

struct MainTally {
  Tally kernelwatch, conbench, bencher;
};

void main_run_trial(const Model& model, const Settings& s, std::size_t target, double shift,
                    std::mt19937_64& rng, MainTally& tally) {
  DetectionSettings detection;
  std::vector<CaseTest> tests;
  std::vector<double> thresholds;
  bool conbench_false = false, bencher_false = false;
  bool conbench_hit = false, bencher_hit = false;
  for (int i = 0; i < s.cases_per_run; ++i) {
    const CaseModel& c = model.cases[static_cast<std::size_t>(i) % model.cases.size()];
    double slow = static_cast<std::size_t>(i) == target ? shift : 0;
    const bool clocked = s.clocks && !c.run_clock_residuals.empty();
    std::vector<double> history, head, head_clocks;
    std::vector<RunClock> history_clocks;
    for (int r = 0; r < s.history; ++r) {
      if (clocked) {
        ClockedRun run = main_run_with_clocks(c, 0, s.replicates, rng);
        history.push_back(geometric_mean(run.locations));
        history_clocks.push_back(run_clock(run.locations, run.clocks));
      } else {
        history.push_back(geometric_mean(main_run(c, 0, s.replicates, rng)));
      }
    }
    if (clocked) {
      ClockedRun run = main_run_with_clocks(c, slow, s.replicates, rng);
      head = run.locations;
      head_clocks = run.clocks;
    } else {
      head = main_run(c, slow, s.replicates, rng);
    }
    NoiseModel noise = s.learned_noise ? learned(model, c, false, clocked) : default_noise();
    tests.push_back(test_history(head, history, noise, detection, head_clocks, history_clocks));
    thresholds.push_back(detection.min_threshold);
    // The reference rules on the same run locations.
    double mean = 0, squares = 0, n = static_cast<double>(history.size());
    for (double h : history) mean += std::log(h) / n;
    for (double h : history) squares += (std::log(h) - mean) * (std::log(h) - mean);
    double sd = std::sqrt(squares / (n - 1));
    double x = std::log(geometric_mean(head));
    bool conbench = std::abs(x - mean) > 5 * sd;
    bool bencher = x > mean + student_t_quantile(0.98, n - 1) * sd;  // one-sided 0.99 boundary
    if (static_cast<std::size_t>(i) == target) {
      conbench_hit = conbench && x > mean;
      bencher_hit = bencher;
    } else {
      ++tally.conbench.comparisons;
      ++tally.bencher.comparisons;
      tally.conbench.false_comparisons += conbench;
      tally.bencher.false_comparisons += bencher;
      conbench_false = conbench_false || conbench;
      bencher_false = bencher_false || bencher;
    }
  }
  count_decision(decide(tests, thresholds, detection), target, tally.kernelwatch);
  for (Tally* t : {&tally.conbench, &tally.bencher}) ++t->runs;
  tally.conbench.false_runs += conbench_false;
  tally.bencher.false_runs += bencher_false;
  tally.conbench.detected += conbench_hit;
  tally.bencher.detected += bencher_hit;
}

std::string percent(double rate) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f%%", 100 * rate);
  return text;
}

// The cases a slowdown is put in: those whose name holds `large`, or (empty)
// every D=128 case of 2048 tokens or more.
std::vector<std::size_t> large_targets(const Model& model, const std::string& large) {
  std::vector<std::size_t> targets;
  for (std::size_t i = 0; i < model.cases.size(); ++i) {
    const std::string& name = model.cases[i].name;
    bool is_large = !large.empty() && name.find(large) != std::string::npos;
    for (const char* size : {"s2048", "s4096", "s8192", "s16384"}) {
      is_large = is_large || (large.empty() && name.find("/d128/") != std::string::npos &&
                              name.find(size) != std::string::npos);
    }
    if (is_large) targets.push_back(i);
  }
  return targets;
}

// The smallest detectable change, checked: for each large case, the median
// of what its A/A pull requests' tests say they can see (what the run page
// shows), then that slowdown injected and the share of jobs that flag it.
// A screened case is measured again before the verdict, so the share may
// exceed the 90% the figure promises; it must not fall far short of it.
json detectable_scenario(const Model& model, Settings settings, const std::vector<std::size_t>& targets,
                         std::uint64_t seed) {
  settings.learned_noise = true;
  const DetectionSettings detection;
  const int trials = std::max(100, settings.trials / static_cast<int>(targets.size()));
  json out = json::object();
  std::printf("\nThe smallest detectable change of each large case (learned prior, PR A/B), %d runs each:\n",
              trials);
  for (std::size_t target : targets) {
    std::mt19937_64 rng(seed + 11 + target);
    std::vector<double> seen;
    Tally ignored;
    std::vector<CaseTest> tests;
    for (int t = 0; t < trials; ++t) {
      pr_run(model, settings, target, 0, rng, ignored, &tests);
      const auto judged = static_cast<std::size_t>(std::count_if(
          tests.begin(), tests.end(), [](const CaseTest& c) { return c.method != CaseTest::Method::none; }));
      if (auto d = detectable_change(tests[target], detection.min_threshold, judged, detection))
        seen.push_back(*d);
    }
    std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2), seen.end());
    const double change = seen[seen.size() / 2];
    Tally slowed;
    for (int t = 0; t < trials; ++t) pr_run(model, settings, target, change, rng, slowed);
    const double rate = static_cast<double>(slowed.detected) / slowed.runs;
    std::printf("  %-40s sees %.2f%% (median of its A/A jobs); flagged at that slowdown in %s\n",
                model.cases[target].name.c_str(), 100 * change, percent(rate).c_str());
    out[model.cases[target].name] = {
        {"detectable", change}, {"flagged_at_detectable", rate}, {"runs", trials}};
  }
  return out;
}

constexpr double kShifts[] = {0, 0.01, 0.03, 0.05};

// Pull requests: A/A (no slowdown anywhere; the target is just another case)
// and each slowdown of a large case, printed as a row and returned as JSON.
// With the learned prior, each large case's detections go to `per_case`.
json pr_scenario(const Model& model, const Settings& settings, const std::vector<std::size_t>& targets,
                 std::uint64_t seed, const std::string& prior,
                 std::map<std::string, std::map<double, int>>& per_case) {
  const bool learned_noise = settings.learned_noise;
  json pr = json::object();
  std::vector<Tally> pr_tallies;
  for (double shift : kShifts) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(shift * 1000));
    Tally tally;
    for (int t = 0; t < settings.trials; ++t) {
      std::size_t target = targets[static_cast<std::size_t>(t) % targets.size()];
      Tally before = tally;
      pr_run(model, settings, target, shift, rng, tally);
      if (learned_noise && shift > 0)
        per_case[model.cases[target].name][shift] += tally.detected - before.detected;
    }
    pr_tallies.push_back(tally);
    pr[shift == 0 ? "aa" : "slower_" + std::to_string(static_cast<int>(shift * 100)) + "pct"] =
        tally.to_json();
  }
  std::printf(
      "%-28s %12s %14s %10s %10s %10s\n", ("pr A/B, " + prior).c_str(),
      percent(static_cast<double>(pr_tallies[0].false_runs) / pr_tallies[0].runs).c_str(),
      percent(static_cast<double>(pr_tallies[0].false_comparisons) / pr_tallies[0].comparisons).c_str(),
      percent(static_cast<double>(pr_tallies[1].detected) / pr_tallies[1].runs).c_str(),
      percent(static_cast<double>(pr_tallies[2].detected) / pr_tallies[2].runs).c_str(),
      percent(static_cast<double>(pr_tallies[3].detected) / pr_tallies[3].runs).c_str());
  return pr;
}

// Main-branch runs judged against a history, by kernelwatch's rule and by
// Conbench's and Bencher's, printed as rows and returned as JSON.
json main_scenario(const Model& model, const Settings& settings, const std::vector<std::size_t>& targets,
                   std::uint64_t seed, const std::string& prior) {
  json main = json::object();
  std::vector<MainTally> main_tallies;
  for (double shift : kShifts) {
    std::mt19937_64 rng(seed + 7 + static_cast<std::uint64_t>(shift * 1000));
    MainTally tally;
    int trials = std::max(100, settings.trials / 4);  // 30-run histories per case: slower
    for (int t = 0; t < trials; ++t)
      main_run_trial(model, settings, targets[static_cast<std::size_t>(t) % targets.size()], shift, rng,
                     tally);
    main_tallies.push_back(tally);
    std::string key = shift == 0 ? "aa" : "slower_" + std::to_string(static_cast<int>(shift * 100)) + "pct";
    main[key] = {{"kernelwatch", tally.kernelwatch.to_json()},
                 {"conbench", tally.conbench.to_json()},
                 {"bencher", tally.bencher.to_json()}};
  }
  for (const auto& [label, pick_of] :
       {std::pair{"main vs history", 0}, {"  Conbench rule", 1}, {"  Bencher rule", 2}}) {
    const int pick = pick_of;  // a lambda may not capture a structured binding before C++20 in clang 14
    auto of = [&](const MainTally& t) -> const Tally& {
      return pick == 0 ? t.kernelwatch : pick == 1 ? t.conbench : t.bencher;
    };
    std::printf(
        "%-28s %12s %14s %10s %10s %10s\n", (std::string(label) + (pick == 0 ? ", " + prior : "")).c_str(),
        percent(static_cast<double>(of(main_tallies[0]).false_runs) / of(main_tallies[0]).runs).c_str(),
        percent(static_cast<double>(of(main_tallies[0]).false_comparisons) / of(main_tallies[0]).comparisons)
            .c_str(),
        percent(static_cast<double>(of(main_tallies[1]).detected) / of(main_tallies[1]).runs).c_str(),
        percent(static_cast<double>(of(main_tallies[2]).detected) / of(main_tallies[2]).runs).c_str(),
        percent(static_cast<double>(of(main_tallies[3]).detected) / of(main_tallies[3]).runs).c_str());
  }
  return main;
}

struct Arguments {
  std::string model_path = KW_DEFAULT_NOISE_MODEL, json_path;
  Settings settings;
  std::uint64_t seed = 20261123;
  std::string large;  // empty: every D=128, S >= 2048 case
};

// The command line; nullopt (the usage printed) for one it does not know.
std::optional<Arguments> parse_arguments(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--model")
      args.model_path = value();
    else if (arg == "--json")
      args.json_path = value();
    else if (arg == "--trials")
      args.settings.trials = std::stoi(value());
    else if (arg == "--seed")
      args.seed = std::stoull(value());
    else if (arg == "--replicates")
      args.settings.replicates = std::stoi(value());
    else if (arg == "--large-case")
      args.large = value();  // a substring of the cases to slow
    else if (arg == "--no-clocks")
      args.settings.clocks = false;  // plain times, as before clocks were reported
    else {
      std::cerr
          << "usage: kw-detector-bench [--model FILE] [--json OUT] [--trials N] [--seed S] [--replicates K] "
             "[--large-case NAME] [--no-clocks]\n";
      return std::nullopt;
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Arguments> args = parse_arguments(argc, argv);
  if (!args) return 2;
  const std::string& model_path = args->model_path;
  const std::string& json_path = args->json_path;
  const std::uint64_t seed = args->seed;
  Settings settings = args->settings;
  auto started = std::chrono::steady_clock::now();
  Model model = load_model(model_path);
  const std::vector<std::size_t> targets = large_targets(model, args->large);
  if (targets.empty()) {
    std::cerr << "kw-detector-bench: no large case in the model\n";
    return 2;
  }
  std::map<std::string, std::map<double, int>> per_case;  // learned prior, PR: detections per slowdown
  std::size_t with_clocks = 0, runs_with_clocks = 0;
  for (const CaseModel& c : model.cases) {
    with_clocks += !c.ab_clock_residuals.empty();
    runs_with_clocks += !c.run_clock_residuals.empty();
  }
  std::cout << "noise model: " << model.cases.size() << " cases measured on " << model.device << " ("
            << model_path << "); "
            << (settings.clocks && with_clocks > 0
                    ? "at equal SM clock: pull requests in " + std::to_string(with_clocks) +
                          " cases, main runs in " + std::to_string(runs_with_clocks)
                    : std::string("on plain times"))
            << "\n";
  std::cout << settings.cases_per_run << " comparisons per run, " << settings.replicates
            << " replicates a side, " << settings.trials << " runs per cell; slowdowns rotate over "
            << targets.size() << " large cases\n\n";

  json results = json::object();
  results["model"] = {{"path", model_path}, {"device", model.device}, {"cases", model.cases.size()}};
  results["settings"] = {{"large_cases", targets.size()},
                         {"cases_per_run", settings.cases_per_run},
                         {"replicates", settings.replicates},
                         {"at_equal_clock", settings.clocks},
                         {"confirm_replicates", settings.confirm},
                         {"history_runs", settings.history},
                         {"trials", settings.trials},
                         {"seed", seed}};
  std::printf("%-28s %12s %14s %10s %10s %10s\n", "scenario", "run false", "per compar.", "1%", "3%", "5%");
  for (bool learned_noise : {true, false}) {
    settings.learned_noise = learned_noise;
    std::string prior = learned_noise ? "learned prior" : "default prior";
    // PR: A/A (no slowdown anywhere; the target is just another case) and
    // each slowdown of the large case.
    json pr = pr_scenario(model, settings, targets, seed, prior, per_case);
    json main = main_scenario(model, settings, targets, seed, prior);
    results[learned_noise ? "learned_prior" : "default_prior"] = {{"pr", pr}, {"main", main}};
  }
  std::printf("\nPR A/B detection per large case (learned prior), %d runs each:\n",
              settings.trials / static_cast<int>(targets.size()));
  json per_case_json = json::object();
  for (const auto& [name, by_shift] : per_case) {
    double runs = static_cast<double>(settings.trials) / static_cast<double>(targets.size());
    const CaseModel* c = nullptr;
    for (const CaseModel& m : model.cases) {
      if (m.name == name) c = &m;
    }
    std::printf("  %-40s between-replicate sd %.2f%%:", name.c_str(), 100 * c->ab_between_sd);
    json row{{"ab_between_sd", c->ab_between_sd}};
    for (const auto& [shift, hits] : by_shift) {
      std::printf("  %d%% %s", static_cast<int>(shift * 100), percent(hits / runs).c_str());
      row["slower_" + std::to_string(static_cast<int>(shift * 100)) + "pct"] = hits / runs;
    }
    std::printf("\n");
    per_case_json[name] = row;
  }
  results["pr_detection_per_large_case"] = per_case_json;
  results["detectable_per_large_case"] = detectable_scenario(model, settings, targets, seed);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  results["seconds"] = seconds;
  std::printf("\n%.1f s\n", seconds);
  if (!json_path.empty()) std::ofstream(json_path) << results.dump(1) << "\n";
  return 0;
}
