#include "replicates.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"
#include "kw/common/subprocess.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path temp_file(const std::string& tag) {
  char pattern[] = "/tmp/kw-replicate-XXXXXX";
  int fd = mkstemp(pattern);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  fs::path path = std::string(pattern) + "-" + tag;
  fs::rename(pattern, path);
  return path;
}

struct PassResult {
  bool ok = false;
  std::string failure;  // why the pass produced nothing
  std::string log_tail;
  json document;
  double seconds = 0;
};

enum class Side { head, base };

// One pass of the bench over `names`, in an order shuffled by `order_seed`.
PassResult run_pass(const fs::path& checkout, const BenchConfig& bench, const RepoConfig& config,
                    const std::vector<std::string>& names, std::uint64_t order_seed, const std::string& impls,
                    const std::atomic<bool>& stop) {
  PassResult result;
  fs::path list = temp_file("cases.txt"), out = temp_file("pass.json");
  {
    std::ofstream file(list);
    for (const std::string& name : names) file << name << "\n";
  }
  const FullBenchConfig& fb = config.full_bench;
  common::ChildSpec spec;
  spec.argv = bench_command(bench, checkout);
  spec.argv.insert(spec.argv.end(), {"--stage", "full_bench", "--json", out.string()});
  // The bench's own arguments first: the replicate settings after them win.
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  for (const std::string& arg :
       {std::string("--case-list"), list.string(), std::string("--order-seed"), std::to_string(order_seed),
        std::string("--max-seconds"), std::to_string(fb.replicate_seconds), std::string("--min-samples"),
        std::to_string(fb.min_samples), std::string("--max-samples"), std::to_string(fb.max_samples),
        std::string("--noise-target"), std::to_string(fb.noise_target)}) {
    spec.argv.push_back(arg);
  }
  spec.argv.push_back("--impls");
  spec.argv.push_back(impls);
  // Only when asked for: a bench built on an older harness knows no such option.
  if (fb.energy_seconds > 0) {
    spec.argv.push_back("--energy-seconds");
    spec.argv.push_back(std::to_string(fb.energy_seconds));
  }
  spec.cwd = checkout;
  spec.timeout_s = config.timeout_for(common::StageName::full_bench);
  common::ChildOutcome outcome = common::run_child(spec, stop);
  result.seconds = outcome.seconds;
  result.log_tail = outcome.output_tail;
  if (std::ifstream in(out); in) {
    try {
      in >> result.document;
    } catch (const std::exception&) {
      result.document = json();
    }
  }
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(list, ec);
  if (!result.document.is_object() || !result.document.contains("stage")) {
    result.failure = outcome.describe() + " without writing its result";
    return result;
  }
  result.ok = true;
  return result;
}

// Which replicate index each case has reached on each side.
struct Counts {
  std::map<std::string, std::int64_t> head, base;
  std::map<std::string, std::int64_t>& of(Side side) { return side == Side::head ? head : base; }
};

// The candidate's replicate locations and, where the bench reports them,
// their SM clocks.
struct Replicates {
  std::vector<double> locations, clocks;
};
Replicates candidate_replicates(const json& c, const char* key) {
  if (!c.contains(key)) return {};
  for (const json& m : c[key]) {
    if (m.value("impl", "") != "candidate") continue;
    std::vector<double> samples = m["samples_ns"].get<std::vector<double>>();
    std::vector<std::int64_t> throttled = m.value("throttled_samples", std::vector<std::int64_t>{});
    std::vector<std::int64_t> replicates = m.value("replicates", std::vector<std::int64_t>{});
    std::vector<double> clocks = m.value("sm_mhz", std::vector<double>{});
    common::Timing timing{samples, throttled, replicates, clocks};
    return {common::replicate_locations(timing, common::DetectionSettings{}),
            common::replicate_clocks(timing)};
  }
  return {};
}

std::vector<double> candidate_locations(const json& c, const char* key) {
  return candidate_replicates(c, key).locations;
}

// The standard error of the candidate's log level from the replicates so
// far; infinite below two replicates a side. A/B: the difference's, over
// sqrt(2), so that one target asks as many replicates a side of a pull
// request as of a main run.
double standard_error(const json& c, bool ab) {
  std::vector<double> head = candidate_locations(c, "measurements");
  auto sd = common::replicate_log_sd(head);
  if (!sd) return INFINITY;
  if (!ab) return *sd / std::sqrt(static_cast<double>(head.size()));
  std::vector<double> base = candidate_locations(c, "base_measurements");
  auto base_sd = common::replicate_log_sd(base);
  if (!base_sd) return INFINITY;
  double pooled = std::sqrt(((head.size() - 1) * *sd * *sd + (base.size() - 1) * *base_sd * *base_sd) /
                            static_cast<double>(head.size() + base.size() - 2));
  return pooled *
         std::sqrt((1.0 / static_cast<double>(head.size()) + 1.0 / static_cast<double>(base.size())) / 2);
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

}  // namespace

void merge_replicate(json& accumulated, const json& pass_case, std::int64_t replicate,
                     const char* measurements_key) {
  if (!accumulated.contains(measurements_key)) accumulated[measurements_key] = json::array();
  json& into = accumulated[measurements_key];
  for (const json& m : pass_case.value("measurements", json::array())) {
    json* target = nullptr;
    for (json& existing : into) {
      if (existing["impl"] == m["impl"]) target = &existing;
    }
    if (target == nullptr) {
      json fresh = m;
      fresh["samples_ns"] = json::array();
      fresh["throttled_samples"] = json::array();
      fresh["replicates"] = json::array();
      fresh["sm_mhz"] = json::array();
      for (const char* key : {"energy_j", "energy_replicates", "power_w"}) fresh.erase(key);
      into.push_back(std::move(fresh));
      target = &into.back();
    }
    const std::size_t offset = (*target)["samples_ns"].size();
    // Clocks stay only while every replicate has them, one per sample.
    if (target->contains("sm_mhz")) {
      if (m.contains("sm_mhz") && m["sm_mhz"].size() == m["samples_ns"].size()) {
        for (const json& mhz : m["sm_mhz"]) (*target)["sm_mhz"].push_back(mhz);
      } else {
        target->erase("sm_mhz");
      }
    }
    for (const json& sample : m["samples_ns"]) {
      (*target)["samples_ns"].push_back(sample);
      (*target)["replicates"].push_back(replicate);
    }
    for (const json& index : m.value("throttled_samples", json::array()))
      (*target)["throttled_samples"].push_back(index.get<std::int64_t>() + static_cast<std::int64_t>(offset));
    (*target)["median_ns"] = common::median((*target)["samples_ns"].get<std::vector<double>>());
    // Energy: one value per replicate that measured it, with its index.
    if (m.contains("energy_j") && !m["energy_j"].empty() && m.contains("power_w") && !m["power_w"].empty()) {
      for (const char* key : {"energy_j", "power_w", "energy_replicates"}) {
        if (!target->contains(key)) (*target)[key] = json::array();
      }
      (*target)["energy_j"].push_back(m["energy_j"][0]);
      (*target)["power_w"].push_back(m["power_w"][0]);
      (*target)["energy_replicates"].push_back(replicate);
    }
  }
  if (pass_case.contains("gpu_state")) {
    const json& state = pass_case["gpu_state"];
    if (!accumulated.contains("gpu_state")) {
      accumulated["gpu_state"] = state;
    } else {
      json& merged = accumulated["gpu_state"];
      merged["throttle_reasons"] = merged.value("throttle_reasons", std::uint64_t{0}) |
                                   state.value("throttle_reasons", std::uint64_t{0});
      for (const char* key : {"sm_mhz", "mem_mhz"}) {
        // First and last reading over every replicate: before and after the case.
        if (state.contains(key) && !state[key].empty()) {
          if (!merged.contains(key) || merged[key].empty())
            merged[key] = state[key];
          else
            merged[key] = json::array({merged[key].front(), state[key].back()});
        }
      }
      for (const char* key : {"temp_c_max", "power_w_max"}) {
        if (state.contains(key))
          merged[key] = std::max(merged.value(key, state[key].get<double>()), state[key].get<double>());
      }
    }
  }
}

BenchResult run_replicated_full_bench(const BenchConfig& bench, const RepoConfig& config,
                                      const ReplicateOptions& options) {
  static const std::atomic<bool> never{false};
  const std::atomic<bool>& stop = options.stop ? *options.stop : never;
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  const FullBenchConfig& fb = config.full_bench;
  const bool ab = options.base_checkout.has_value();
  const double budget_s = fb.budget_s * (ab ? 2 : 1);  // the setting is per side
  BenchResult result;
  std::uint64_t seed =
      options.seed != 0
          ? options.seed
          : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());

  std::map<std::string, json> cases;  // accumulated, by name
  std::vector<std::string> order;     // first-seen order, for the report
  Counts counts;
  std::string failures;
  json passes = json::array();
  std::vector<std::string> all;             // every case the bench lists
  std::vector<std::string> with_baselines;  // those with baseline implementations
  bool head_failed = false;

  // One replicate of `names` on both sides (head only without a base), in
  // ABBA order across replicates.
  int pass_number = 0;
  // Every replicate times the candidate alone, on both sides: no side sits
  // in a power state that baselines made, and main and pull-request runs
  // measure alike. The baselines get a context pass of their own.
  std::string impls = "candidate";
  double setup_seconds = 0, measure_seconds = 0;
  auto replicate = [&](const std::vector<std::string>& names) {
    std::vector<Side> sides{Side::head};
    if (ab)
      sides = (pass_number % 2 == 0) ? std::vector<Side>{Side::head, Side::base}
                                     : std::vector<Side>{Side::base, Side::head};
    for (Side side : sides) {
      if (stop.load()) return;
      const fs::path& checkout = side == Side::head ? options.checkout : *options.base_checkout;
      std::uint64_t order_seed = seed + 7919 * static_cast<std::uint64_t>(pass_number) + (side == Side::base);
      PassResult pass = run_pass(checkout, bench, config, names, order_seed | 1, impls, stop);
      result.seconds += pass.seconds;
      const char* side_name = side == Side::head ? "head" : "base";
      passes.push_back({{"side", side_name}, {"cases", names.size()}, {"seconds", pass.seconds}});
      if (!pass.ok) {
        failures += std::string(failures.empty() ? "" : "; ") + side_name + " pass " +
                    std::to_string(pass_number) + ": " + pass.failure;
        result.log_tail += "--- " + std::string(side_name) + " pass\n" + pass.log_tail;
        if (side == Side::head) head_failed = true;
        continue;
      }
      if (result.device.is_null()) result.device = pass.document.value("device", json());
      const json& stage = pass.document["stage"];
      for (const json& c : stage["details"].value("cases", json::array())) {
        const json& d = c.value("details", json::object());
        setup_seconds += d.value("setup_seconds", 0.0);
        measure_seconds += d.value("measure_seconds", 0.0);
      }
      if (stage.value("status", "") == "failed") {
        failures += std::string(failures.empty() ? "" : "; ") + side_name + ": " + stage.value("message", "");
        result.log_tail += stage.value("log_tail", std::string());
        if (side == Side::head) head_failed = true;
      }
      for (const json& c : pass.document.value("cases", json::array())) {
        if (!c.contains("measurements")) continue;  // a failed case
        std::string name = c["name"];
        auto [it, fresh] = cases.try_emplace(name, json::object());
        if (fresh) {
          order.push_back(name);
          it->second["name"] = name;
          it->second["params"] = c.value("params", json::object());
        }
        std::int64_t& index = counts.of(side)[name];
        merge_replicate(it->second, c, index, side == Side::head ? "measurements" : "base_measurements");
        ++index;
      }
    }
    ++pass_number;
  };

  auto progress = [&](const std::string& what) {
    log("full_bench " + bench.name + ": " + what + " (" + fixed(result.seconds, 1) + " s of " +
        fixed(budget_s, 0) + " s)");
  };

  // The cases: what the bench lists under its glob.
  {
    fs::path listing = temp_file("list.json");
    common::ChildSpec spec;
    spec.argv = bench_command(bench, options.checkout);
    spec.argv.insert(spec.argv.end(), {"--list", "--case", bench.cases, "--json", listing.string()});
    spec.cwd = options.checkout;
    spec.timeout_s = 120;
    common::ChildOutcome outcome = common::run_child(spec, stop);
    json listed;
    if (std::ifstream in(listing); in) {
      try {
        in >> listed;
      } catch (const std::exception&) {
      }
    }
    std::error_code ec;
    fs::remove(listing, ec);
    if (!outcome.ok() || !listed.contains("cases")) {
      result.status = "failed";
      result.message = bench.name + ": --list " + outcome.describe();
      result.log_tail = outcome.output_tail;
      return result;
    }
    const auto& only = options.only_cases;
    for (const json& c : listed["cases"]) {
      if (!c.value("timed", true)) continue;  // correctness-only: preflight ran it
      const std::string name = c["name"];
      if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
      all.push_back(name);
      if (!c.value("baselines", json::array()).empty()) with_baselines.push_back(name);
    }
  }

  if (!options.only_cases.empty())
    log("full_bench " + bench.name + ": " + std::to_string(all.size()) +
        " of the bench's cases, those asked for");
  // First pass: the minimum replicates of every case.
  for (int r = 0; r < fb.replicates && !stop.load(); ++r) {
    replicate(all);
    progress("replicate " + std::to_string(r + 1) + " of every case");
    if (head_failed && cases.empty()) break;
  }
  // Adaptive: more replicates of the cases whose level is still uncertain,
  // while the budget allows a pass of them.
  std::map<std::string, double> per_case_seconds;
  for (int r = fb.replicates; r < fb.max_replicates && !stop.load(); ++r) {
    std::vector<std::string> uncertain;
    for (const std::string& name : order) {
      if (counts.head[name] < fb.replicates) continue;  // failed in the first pass
      if (standard_error(cases[name], ab) > fb.target_se) uncertain.push_back(name);
    }
    if (uncertain.empty()) break;
    double pass_estimate = result.seconds / std::max(1, pass_number) * static_cast<double>(uncertain.size()) /
                           static_cast<double>(all.size());
    if (result.seconds + pass_estimate > budget_s) {
      progress(std::to_string(uncertain.size()) + " case(s) above the target spread, budget spent");
      break;
    }
    replicate(uncertain);
    progress("replicate " + std::to_string(r + 1) + " of " + std::to_string(uncertain.size()) +
             " case(s) above the target spread");
  }
  // Confirmation (A/B): a case the first pass screens as changed is
  // measured again; the run is judged on all its replicates.
  if (ab && fb.confirm_replicates > 0 && !stop.load()) {
    common::DetectionSettings settings;
    // The server judges a pull request by the stricter of its own and its
    // base's thresholds (docs/detection.md): screen as it will judge.
    auto threshold_of = [&](const std::string& name) {
      double own = config.thresholds.for_case(name).value_or(settings.min_threshold);
      if (!options.base_thresholds) return own;
      return std::min(own, options.base_thresholds->for_case(name).value_or(settings.min_threshold));
    };
    std::vector<std::string> screened;
    for (const std::string& name : order) {
      Replicates head = candidate_replicates(cases[name], "measurements");
      Replicates base = candidate_replicates(cases[name], "base_measurements");
      common::CaseTest test = common::test_ab(head.locations, base.locations, common::default_noise(),
                                              settings, head.clocks, base.clocks);
      double min_threshold = threshold_of(name);
      if (common::needs_confirmation(test, min_threshold, settings)) screened.push_back(name);
    }
    if (!screened.empty()) {
      for (const std::string& name : screened) cases[name]["first_pass_replicates"] = counts.head[name];
      for (int r = 0; r < fb.confirm_replicates && !stop.load(); ++r) replicate(screened);
      progress(std::to_string(screened.size()) + " case(s) screened by the first pass measured again");
    }
    result.details["confirmed_cases"] = screened;
  }

  // Context for the speedup series and the machine-drift signal of a run
  // judged against its history: the head's baseline implementations, one
  // replicate, after the candidate's. An A/B run is judged against its
  // base, measured in the same job, and skips it.
  if (fb.context_pass && !ab && !stop.load() && !with_baselines.empty()) {
    impls = "baseline:*";
    ++pass_number;
    PassResult pass = run_pass(options.checkout, bench, config, with_baselines, seed + 1, impls, stop);
    result.seconds += pass.seconds;
    passes.push_back(
        {{"side", "head baselines"}, {"cases", with_baselines.size()}, {"seconds", pass.seconds}});
    if (pass.ok) {
      for (const json& c : pass.document.value("cases", json::array())) {
        auto it = cases.find(c.value("name", ""));
        if (it != cases.end() && c.contains("measurements"))
          merge_replicate(it->second, c, 0, "measurements");
      }
    }
    progress("baseline implementations of the head, one replicate");
  }

  for (const std::string& name : order) {
    json& c = cases[name];
    // A case without a full set of head replicates keeps what it has; one
    // whose base never ran is judged against the stored history instead.
    if (c.contains("base_measurements") && !c.contains("measurements")) c.erase("base_measurements");
    if (!c.contains("measurements")) continue;
    result.cases.push_back(std::move(c));
  }
  std::int64_t fewest = INT64_MAX, most = 0;
  for (const auto& [_, n] : counts.head) {
    fewest = std::min(fewest, n);
    most = std::max(most, n);
  }
  result.details["passes"] = passes;
  // Where the candidate passes' time went: per-case setup (allocations,
  // inputs, warm-up) against timed rounds; the rest is process start-up.
  result.details["setup_seconds"] = setup_seconds;
  result.details["measure_seconds"] = measure_seconds;
  result.details["ab"] = ab;
  result.details["seconds"] = result.seconds;
  if (failures.empty() && !stop.load()) {
    result.message = bench.name + ": " + std::to_string(result.cases.size()) + " cases, " +
                     (counts.head.empty() ? "0" : std::to_string(fewest)) + "-" + std::to_string(most) +
                     " replicates" + (ab ? " of base and head alternating" : "") + " in " +
                     fixed(result.seconds, 1) + " s";
  } else {
    result.status = "failed";
    result.message = bench.name + ": " + (stop.load() ? std::string("stopped") : failures);
  }
  return result;
}

}  // namespace kw::agent
