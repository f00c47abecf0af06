// kw-detector-bench: replays synthetic benchmark histories with realistic GPU
// timing noise and measures, per noise scenario and samples per side, the
// false-alarm rate on A/A comparisons and the detection rate of injected
// slowdowns, for kernelwatch's detector and, on the same data, two reference
// rules implemented here:
//  - Conbench lookback z-score: z = (x - mean) / sd over up to 100 prior
//    per-run values; alert when |z| > 5.
//  - Bencher t-test threshold: alert when x > mean + t_{0.99, n-1} * sd
//    (upper boundary 0.99) over the prior per-run values.
// Both reference rules see one value per run, its median (the more robust
// choice, which favours them); kernelwatch sees the raw samples.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"

namespace {

using namespace kw::common;

struct Scenario {
  std::string name;
  double jitter;              // log-normal sigma of samples within a run
  double run_jitter = 0.002;  // per-run level offset (clocks, placement)
  double outlier_rate = 0;    // samples hit by an outlier (x1.2 .. x3)
  double bimodal_gap = 0;     // second mode this much slower; mix varies per run (30..70%)
  double drift_step = 0;      // random-walk step of the run level, per run
  double throttle_rate = 0;   // samples taken while throttled (x1.15, marked)
};

struct Run {
  std::vector<double> samples;
  std::vector<std::int64_t> throttled;
  double median = 0;
  double location = 0;
};

Run simulate_run(std::mt19937_64& rng, const Scenario& s, double level, int n) {
  std::normal_distribution<double> gauss(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  Run run;
  double mix = 0.3 + 0.4 * uniform(rng);
  for (int i = 0; i < n; ++i) {
    double t = level * std::exp(s.jitter * gauss(rng));
    if (s.bimodal_gap > 0 && uniform(rng) < mix) t *= 1 + s.bimodal_gap;
    if (uniform(rng) < s.outlier_rate) t *= 1.2 + 1.8 * uniform(rng);
    if (uniform(rng) < s.throttle_rate) {
      t *= 1.15;
      run.throttled.push_back(i);
    }
    run.samples.push_back(t);
  }
  run.median = median(run.samples);
  run.location = location({run.samples, run.throttled}, DetectionSettings{});
  return run;
}

// Student-t CDF through the regularized incomplete beta function (Numerical
// Recipes' continued fraction), inverted by bisection.
double incomplete_beta_cf(double a, double b, double x) {
  double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
  d = 1 / (std::abs(d) < 1e-300 ? 1e-300 : d);
  double h = d;
  for (int m = 1; m <= 300; ++m) {
    double m2 = 2 * m, aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    d = 1 / (std::abs(d) < 1e-300 ? 1e-300 : d);
    c = 1 + aa / c;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    d = 1 / (std::abs(d) < 1e-300 ? 1e-300 : d);
    c = 1 + aa / c;
    double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-14) break;
  }
  return h;
}

double regularized_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log(1 - x));
  if (x < (a + 1) / (a + b + 2)) return front * incomplete_beta_cf(a, b, x) / a;
  return 1 - front * incomplete_beta_cf(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double df) {
  double tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  double lo = -100, hi = 100;
  for (int i = 0; i < 200; ++i) {
    double mid = (lo + hi) / 2;
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// One trial: `history_runs` runs at the case's level, then the head run
// `shift` slower. Each trial has its own seed, so every rule sees the same data.
struct Trial {
  std::vector<Run> history;
  Run head;
};

Trial make_trial(std::uint64_t seed, const Scenario& scenario, int n, int history_runs, double shift) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  double drift = 0;
  Trial trial;
  for (int r = 0; r < history_runs; ++r) {
    drift += scenario.drift_step * gauss(rng);
    double level = 100000 * std::exp(drift + scenario.run_jitter * gauss(rng));
    trial.history.push_back(simulate_run(rng, scenario, level, n));
  }
  drift += scenario.drift_step * gauss(rng);
  double level = 100000 * std::exp(drift + scenario.run_jitter * gauss(rng)) * (1 + shift);
  trial.head = simulate_run(rng, scenario, level, n);
  return trial;
}

struct Verdicts {
  bool kernelwatch_regression, kernelwatch_any, conbench_regression, conbench_any, bencher;
  double z;  // (head - mean) / sd over the history's per-run medians: both reference rules' statistic
};

Verdicts decide(const std::vector<Run>& history, const Run& head, double t99) {
  Verdicts v{};
  DetectionSettings settings;
  std::vector<double> medians, locations;
  for (const Run& run : history) {
    medians.push_back(run.median);
    locations.push_back(run.location);
  }
  const Run& base = history.back();
  Comparison c = compare_times_with_history({head.samples, head.throttled}, {base.samples, base.throttled},
                                            locations, settings.min_threshold, settings);
  v.kernelwatch_regression = c.status == ChangeStatus::regression;
  v.kernelwatch_any = c.status == ChangeStatus::regression || c.status == ChangeStatus::improvement;

  double mean = 0, sq = 0;
  for (double m : medians) mean += m;
  mean /= static_cast<double>(medians.size());
  for (double m : medians) sq += (m - mean) * (m - mean);
  double sd = std::sqrt(sq / static_cast<double>(medians.size() - 1));
  double z = (head.median - mean) / sd;
  v.z = z;
  v.conbench_regression = z > 5;
  v.conbench_any = std::abs(z) > 5;
  v.bencher = head.median > mean + t99 * sd;
  return v;
}

// Detection rates of one rule over a set of trials (percent).
struct Rates {
  double false_regressions = 0;  // A/A trials flagged as a regression
  double false_alerts = 0;       // A/A trials flagged either way
  std::vector<double> detected;  // per shift
};

bool covers(const Rates& a, const Rates& b) {  // a detects at least as often as b at every shift
  for (std::size_t i = 0; i < a.detected.size(); ++i) {
    if (a.detected[i] < b.detected[i]) return false;
  }
  return true;
}

std::string percent_row(const Rates& r) {
  char line[256];
  int used = std::snprintf(line, sizeof(line), "%.2f%% | %.2f%%", r.false_regressions, r.false_alerts);
  for (double d : r.detected) used += std::snprintf(line + used, sizeof(line) - used, " | %.1f%%", d);
  return line;
}

// kernelwatch's two settings (min_threshold, history_z) swept over one cell,
// on the same trials as both reference rules. A reference rule is one point
// of its own trade-off between false alarms and power; for each, the table
// names the kernelwatch setting that detects at least as often at every
// shift with the fewest false alarms of the same kind (Conbench's |z| > 5
// alerts both ways, Bencher's boundary is upper only, so its false alarms are
// false regressions).
nlohmann::json sweep(const Scenario& scenario, int n, int history_runs, int aa_trials, int shift_trials,
                     const std::vector<double>& shifts, double t99, std::uint64_t seed) {
  struct Setting {
    double floor, z;
  };
  std::vector<Setting> settings;
  for (double floor : {0.01, 0.0075, 0.005, 0.0025})
    for (double z : {2.5, 2.6, 2.75, 3.0, 3.25, 3.5, 4.0, 4.5, 5.0}) settings.push_back({floor, z});
  const std::size_t rules = 2 + settings.size();  // Conbench, Bencher, then each setting
  std::vector<Rates> rates(rules, Rates{0, 0, std::vector<double>(shifts.size())});
  for (std::size_t column = 0; column <= shifts.size(); ++column) {
    int trials = column == 0 ? aa_trials : shift_trials;
    for (int trial = 0; trial < trials; ++trial) {
      Trial t = make_trial(seed++, scenario, n, history_runs, column == 0 ? 0 : shifts[column - 1]);
      Verdicts v = decide(t.history, t.head, t99);
      std::vector<std::pair<bool, bool>> flags = {{v.conbench_regression, v.conbench_any},
                                                  {v.bencher, v.bencher}};
      std::vector<double> locations;
      for (const Run& run : t.history) locations.push_back(run.location);
      const Run& base = t.history.back();
      for (const Setting& setting : settings) {
        DetectionSettings detection;
        detection.history_z = setting.z;
        ChangeStatus status =
            compare_times_with_history({t.head.samples, t.head.throttled}, {base.samples, base.throttled},
                                       locations, setting.floor, detection)
                .status;
        flags.emplace_back(status == ChangeStatus::regression,
                           status == ChangeStatus::regression || status == ChangeStatus::improvement);
      }
      for (std::size_t rule = 0; rule < rules; ++rule) {
        if (column == 0) {
          rates[rule].false_regressions += 100.0 * flags[rule].first / trials;
          rates[rule].false_alerts += 100.0 * flags[rule].second / trials;
        } else {
          rates[rule].detected[column - 1] += 100.0 * flags[rule].first / trials;
        }
      }
    }
  }
  std::printf("\n### kernelwatch settings swept: %s, %d samples/side (%d A/A trials, %d per shift)\n\n",
              scenario.name.c_str(), n, aa_trials, shift_trials);
  std::printf(
      "| rule | A/A false regressions | A/A false alerts (either way) | 1%% | 2%% | 3%% | 5%% | 10%% |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  nlohmann::json out = {{"scenario", scenario.name},
                        {"samples_per_side", n},
                        {"aa_trials", aa_trials},
                        {"shift_trials", shift_trials},
                        {"rules", nlohmann::json::array()}};
  auto name_of = [&](std::size_t rule) {
    if (rule == 0) return std::string("Conbench z>5");
    if (rule == 1) return std::string("Bencher t-test 0.99");
    char name[96];
    std::snprintf(name, sizeof(name), "kernelwatch min_threshold %.2g%%, history_z %.2f",
                  100 * settings[rule - 2].floor, settings[rule - 2].z);
    return std::string(name);
  };
  for (std::size_t rule = 0; rule < rules; ++rule) {
    std::printf("| %s | %s |\n", name_of(rule).c_str(), percent_row(rates[rule]).c_str());
    out["rules"].push_back({{"rule", name_of(rule)},
                            {"false_regression_pct", rates[rule].false_regressions},
                            {"false_alert_pct", rates[rule].false_alerts},
                            {"detected_pct", rates[rule].detected}});
  }
  std::printf("\n");
  for (std::size_t reference = 0; reference < 2; ++reference) {
    // Conbench alerts both ways: compare alerts either way; Bencher's are regressions only.
    auto false_alarms = [&](const Rates& r) { return reference == 0 ? r.false_alerts : r.false_regressions; };
    std::size_t best = 0;
    for (std::size_t rule = 2; rule < rules; ++rule) {
      if (!covers(rates[rule], rates[reference])) continue;
      if (best == 0 || false_alarms(rates[rule]) < false_alarms(rates[best]) ||
          (false_alarms(rates[rule]) == false_alarms(rates[best]) &&
           rates[rule].detected[0] > rates[best].detected[0]))
        best = rule;
    }
    nlohmann::json match = {{"reference", name_of(reference)}};
    if (best == 0) {
      std::printf("- %s: no swept kernelwatch setting detects as often at every shift\n",
                  name_of(reference).c_str());
    } else {
      double ours = false_alarms(rates[best]), theirs = false_alarms(rates[reference]);
      std::printf("- %s (%s): %s detects at least as often at every shift with %.2f%% false %s vs %.2f%%%s\n",
                  name_of(reference).c_str(), percent_row(rates[reference]).c_str(), name_of(best).c_str(),
                  ours, reference == 0 ? "alerts" : "regressions", theirs,
                  ours < theirs    ? " (fewer)"
                  : ours == theirs ? " (as few)"
                                   : " (more)");
      match["kernelwatch"] = name_of(best);
      match["kernelwatch_false_alarm_pct"] = ours;
      match["reference_false_alarm_pct"] = theirs;
    }
    out["matches"].push_back(match);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int aa_trials = 2000, shift_trials = 500, history_runs = 30, sweep_aa_trials = 40000,
      sweep_shift_trials = 2000;
  bool sweep_only = false;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--aa-trials")
      aa_trials = std::stoi(value());
    else if (arg == "--shift-trials")
      shift_trials = std::stoi(value());
    else if (arg == "--history")
      history_runs = std::stoi(value());
    else if (arg == "--sweep-aa-trials")
      sweep_aa_trials = std::stoi(value());
    else if (arg == "--sweep-shift-trials")
      sweep_shift_trials = std::stoi(value());
    else if (arg == "--sweep-only")
      sweep_only = true;
    else if (arg == "--json")
      json_out = value();
    else {
      std::cerr << "usage: kw-detector-bench [--aa-trials N] [--shift-trials N] [--history RUNS]\n"
                   "                         [--sweep-aa-trials N] [--sweep-shift-trials N] [--sweep-only]\n"
                   "                         [--json FILE]\n";
      return 64;
    }
  }
  const std::vector<Scenario> scenarios = {
      {"0.5% jitter", 0.005},
      {"1% jitter", 0.01},
      {"3% jitter", 0.03},
      {"1% + 3% outliers", 0.01, 0.002, 0.03},
      {"bimodal (modes 4% apart)", 0.005, 0.002, 0, 0.04},
      {"1% + slow drift", 0.01, 0.002, 0, 0, 0.003},
      {"1% + 10% throttled", 0.01, 0.002, 0, 0, 0, 0.10},
  };
  const std::vector<int> sizes = {10, 30, 100};
  const std::vector<double> shifts = {0.01, 0.02, 0.03, 0.05, 0.10};
  const double t99 = student_t_quantile(0.99, history_runs - 1);

  nlohmann::json results = nlohmann::json::array();
  if (!sweep_only) {
    std::printf("| scenario | samples/side | rule | A/A false alarms | 1%% | 2%% | 3%% | 5%% | 10%% |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
  }
  std::uint64_t seed = 20261121;
  for (const Scenario& scenario : sweep_only ? std::vector<Scenario>{} : scenarios) {
    for (int n : sizes) {
      // rows: kernelwatch, conbench, bencher, history z at kernelwatch's
      // false-alarm rate; columns: A/A, then each shift
      double rate[4][6] = {};
      std::vector<double> z_by_column[6];
      double kernelwatch_regression_fa = 0;
      for (std::size_t column = 0; column <= shifts.size(); ++column) {
        double shift = column == 0 ? 0 : shifts[column - 1];
        int trials = column == 0 ? aa_trials : shift_trials;
        int hits[3] = {};
        for (int trial = 0; trial < trials; ++trial) {
          Trial t = make_trial(seed++, scenario, n, history_runs, shift);
          Verdicts v = decide(t.history, t.head, t99);
          // A/A: any alert is false (Bencher's rule has an upper boundary only).
          hits[0] += column == 0 ? v.kernelwatch_any : v.kernelwatch_regression;
          hits[1] += column == 0 ? v.conbench_any : v.conbench_regression;
          hits[2] += v.bencher;
          z_by_column[column].push_back(v.z);
          if (column == 0) kernelwatch_regression_fa += v.kernelwatch_regression;
        }
        for (int rule = 0; rule < 3; ++rule) rate[rule][column] = 100.0 * hits[rule] / trials;
      }
      // The reference rules' statistic with its cutoff moved to give the same
      // A/A false-alarm rate (regressions only) as kernelwatch: power at equal
      // false alarms, the fair comparison of the two methods.
      {
        std::vector<double> aa = z_by_column[0];
        std::sort(aa.begin(), aa.end());
        auto allowed = static_cast<std::size_t>(kernelwatch_regression_fa);
        double cutoff =
            allowed == 0 ? aa.back() : aa[aa.size() - allowed];  // exactly `allowed` A/A values at or above
        for (std::size_t column = 0; column <= shifts.size(); ++column) {
          const auto& zs = z_by_column[column];
          auto above = std::count_if(zs.begin(), zs.end(),
                                     [&](double z) { return allowed == 0 ? z > cutoff : z >= cutoff; });
          rate[3][column] = 100.0 * static_cast<double>(above) / static_cast<double>(zs.size());
        }
      }
      const char* names[4] = {"kernelwatch", "Conbench z>5", "Bencher t-test 0.99",
                              "history z at kernelwatch's false-alarm rate"};
      for (int rule = 0; rule < 4; ++rule) {
        std::printf("| %s | %d | %s | %.2f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% |\n",
                    scenario.name.c_str(), n, names[rule], rate[rule][0], rate[rule][1], rate[rule][2],
                    rate[rule][3], rate[rule][4], rate[rule][5]);
        results.push_back({{"scenario", scenario.name},
                           {"samples_per_side", n},
                           {"rule", names[rule]},
                           {"false_alarm_pct", rate[rule][0]},
                           {"detected_pct",
                            {{"1%", rate[rule][1]},
                             {"2%", rate[rule][2]},
                             {"3%", rate[rule][3]},
                             {"5%", rate[rule][4]},
                             {"10%", rate[rule][5]}}}});
      }
      std::fflush(stdout);
    }
  }
  if (!sweep_only) {
    std::printf(
        "\nA/A trials per cell: %d, slowdown trials per cell: %d, history: %d runs, t_{0.99,%d} = %.4f\n",
        aa_trials, shift_trials, history_runs, history_runs - 1, t99);
  }
  // The cell the targets are stated for: 30 samples per side, 1% noise.
  const Scenario& target = *std::find_if(scenarios.begin(), scenarios.end(),
                                         [](const Scenario& s) { return s.name == "1% jitter"; });
  nlohmann::json swept =
      sweep(target, 30, history_runs, sweep_aa_trials, sweep_shift_trials, shifts, t99, 777000000);
  if (!json_out.empty())
    std::ofstream(json_out) << nlohmann::json{{"cells", results}, {"sweep", swept}}.dump(2) << "\n";
  return 0;
}
