#include "pipeline/measurement_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "kw/common/detection.hpp"
#include "kw/common/stats.hpp"
#include "pipeline/prepared_passes.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

namespace kw::agent {

using nlohmann::json;

namespace {

enum class Side { head, base };

namespace fs = std::filesystem;

// A/B of an executable: both sides run from paths of one length
// (/tmp/kw-ab-XXXXXX/head and .../base, links to the checkouts). The base's tree is named by its commit,
// the head's by its branch: a process's argv and the strings a harness
// copies from it would otherwise differ in length, and with them where its
// stack and heap begin, which moves an allocation-heavy CPU benchmark by
// several percent on some hosts, the same way in every replicate.
class SideAliases {
 public:
  SideAliases(const fs::path& head, const fs::path& base) {
    char pattern[] = "/tmp/kw-ab-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;  // the checkouts' own paths, as before
    dir_ = pattern;
    std::error_code head_ec, base_ec;
    fs::create_directory_symlink(fs::absolute(head), dir_ / "head", head_ec);
    fs::create_directory_symlink(fs::absolute(base), dir_ / "base", base_ec);
    if (head_ec || base_ec) remove();
  }
  SideAliases(const SideAliases&) = delete;
  SideAliases& operator=(const SideAliases&) = delete;
  ~SideAliases() { remove(); }

  std::optional<fs::path> of(Side side) const {
    if (dir_.empty()) return std::nullopt;
    return dir_ / (side == Side::head ? "head" : "base");
  }

 private:
  void remove() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
  fs::path dir_;
};

// The executable's pages dropped from the page cache before a replicate's
// process starts, so that each replicate loads it into pages of its own. A
// base built once and measured in every job would otherwise keep the same
// physical pages for all of them, and a cache placement it drew by chance
// would bias every comparison against it alike, where a fresh one makes it
// noise the replicates measure. Best effort: a file that cannot be opened is
// the bench's to report.
void drop_cached_pages(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  // Written back first: dirty pages (a build that just linked it) stay cached.
  if (::fdatasync(fd) == 0) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// The candidate's replicate locations and, where the bench reports them,
// their SM clocks.
struct Replicates {
  std::vector<double> locations, clocks;
  common::ReplicateLocation rule = common::ReplicateLocation::trimmed_mean;
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
    timing.rule = common::replicate_location_from(m.value("replicate_location", "trimmed_mean"))
                      .value_or(common::ReplicateLocation::trimmed_mean);
    return {common::replicate_locations(timing, common::DetectionSettings{}),
            common::replicate_clocks(timing), timing.rule};
  }
  return {};
}

// The standard error of the candidate's log level from the replicates so
// far; infinite below two replicates a side. A/B: the difference's, over
// sqrt(2), so that one target asks as many replicates a side of a pull
// request as of a main run.
double standard_error(const json& c, bool ab) {
  std::vector<double> head = candidate_replicates(c, "measurements").locations;
  auto sd = common::replicate_log_sd(head);
  if (!sd) return INFINITY;
  if (!ab) return *sd / std::sqrt(static_cast<double>(head.size()));
  std::vector<double> base = candidate_replicates(c, "base_measurements").locations;
  auto base_sd = common::replicate_log_sd(base);
  if (!base_sd) return INFINITY;
  const auto head_df = static_cast<double>(head.size() - 1), base_df = static_cast<double>(base.size() - 1);
  double pooled = std::sqrt((head_df * *sd * *sd + base_df * *base_sd * *base_sd) /
                            static_cast<double>(head.size() + base.size() - 2));
  return pooled *
         std::sqrt((1.0 / static_cast<double>(head.size()) + 1.0 / static_cast<double>(base.size())) / 2);
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

void merge_gpu_state(json& accumulated, const json& state) {
  if (!accumulated.contains("gpu_state")) {
    accumulated["gpu_state"] = state;
    return;
  }
  json& merged = accumulated["gpu_state"];
  merged["throttle_reasons"] =
      merged.value("throttle_reasons", std::uint64_t{0}) | state.value("throttle_reasons", std::uint64_t{0});
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

json fresh_measurement(const json& m) {
  json fresh = m;
  fresh["samples_ns"] = json::array();
  fresh["throttled_samples"] = json::array();
  fresh["replicates"] = json::array();
  fresh["sm_mhz"] = json::array();
  for (const char* key : {"energy_j", "energy_replicates", "power_w"}) fresh.erase(key);
  return fresh;
}

// The replicated full_bench of one bench, step by step: list the cases, the
// first pass, the adaptive passes, the confirmation (A/B), the baselines'
// context pass, then the result.
class Engine {
 public:
  Engine(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
         const EngineOptions& options, const std::atomic<bool>& stop)
      : adapter_(adapter),
        bench_(bench),
        config_(config),
        options_(options),
        stop_(stop),
        fb_(config.full_bench),
        ab_(options.base_checkout.has_value()),
        // Not a python bench's: the extensions torch's load() builds keep
        // their checkout's path in their build files, and through a link
        // every job's first process would build them again on the pass's
        // clock; its interpreter's argv is the same on both sides.
        aliases_(ab_ && bench.format != BenchFormat::python
                     ? std::make_unique<SideAliases>(options.checkout, *options.base_checkout)
                     : nullptr),
        budget_s_(fb_.budget_s * (ab_ ? 2 : 1)),  // the setting is per side
        seed_(options.seed != 0
                  ? options.seed
                  : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count())) {
  }

  BenchResult run() {
    // Every case will be timed: the processes import while the cases are listed.
    if (!ab_ || !fb_.skip_identical || !options_.fingerprint) prepare_both_sides();
    if (!list()) return std::move(result_);
    skip_identical();
    first_pass();
    adaptive_passes();
    confirm();
    resolve();
    context_pass();
    return finish();
  }

 private:
  BenchContext context(Side side) const {
    fs::path checkout = side == Side::head ? options_.checkout : *options_.base_checkout;
    if (aliases_)
      if (std::optional<fs::path> alias = aliases_->of(side)) checkout = *alias;
    return {bench_, config_, checkout, stop_, prepared_.get()};
  }
  void log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }
  void progress(const std::string& what) const {
    log("full_bench " + bench_.name + ": " + what + " (" + fixed(result_.seconds, 1) + " s of " +
        fixed(budget_s_, 0) + " s)");
  }

  // The cases: what the bench lists (or, for a harness that names them only
  // as it runs them, what its first replicate measures).
  bool list() {
    CaseListing listing = options_.listing ? *options_.listing : adapter_.list_cases(context(Side::head));
    if (!listing.ok) {
      result_.status = "failed";
      result_.message = bench_.name + ": cannot list its cases: " + listing.failure;
      result_.log_tail = listing.log_tail;
      return false;
    }
    groups_ = listing.groups;
    discover_ = listing.cases_from_first_pass;
    std::erase_if(listing.cases, [](const ListedCase& c) { return !c.timed; });  // the preflight's alone
    std::optional<common::ShardSplit> shard;
    if (options_.shard && options_.shard->count > 1) {
      std::vector<std::string> names;
      for (const ListedCase& c : listing.cases) names.push_back(c.name);
      if (discover_) {
        groups_ = common::ShardSplit(groups_, *options_.shard).cases();
      } else {
        shard.emplace(names, *options_.shard);
      }
      log("full_bench " + bench_.name + ": shard " + common::to_string(*options_.shard) + ", " +
          std::to_string(discover_ ? groups_.size() : shard->cases().size()) + " of its " +
          std::to_string(discover_ ? listing.groups.size() : names.size()) +
          (discover_ ? " benchmarks" : " cases"));
    }
    const auto& only = options_.only_cases;
    for (const ListedCase& c : listing.cases) {
      if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
      if (shard && !shard->contains(c.name)) continue;
      all_.push_back(c.name);
      if (c.has_baselines) with_baselines_.push_back(c.name);
    }
    if (!only.empty())
      log("full_bench " + bench_.name + ": " + std::to_string(all_.size()) +
          " of the bench's cases, those asked for");
    return true;
  }

  // A/B: the cases whose code is identical on both sides are left out, but
  // for the audit: a share of them (full_bench.audit_share, at least one)
  // drawn at random, timed like the changed ones so the miss rate is
  // measured. A harness that names its cases only as it runs them (NVBench)
  // is timed whole.
  void skip_identical() {
    if (!ab_ || !fb_.skip_identical || !options_.fingerprint || discover_ || stop_.load()) return;
    const FingerprintSet head =
        options_.head_fingerprints ? *options_.head_fingerprints : options_.fingerprint(options_.checkout);
    const FingerprintSet base = options_.base_fingerprints ? *options_.base_fingerprints
                                                           : options_.fingerprint(*options_.base_checkout);
    fingerprint_seconds_ = (options_.base_fingerprints ? 0 : base.seconds) +  // else counted where taken
                           (options_.head_fingerprints ? 0 : head.seconds);
    std::vector<std::string> identical, measured;
    json changed = json::object();
    for (const std::string& name : all_) {
      head_fingerprints_[name] = head.of(name);
      if (identical_code(head_fingerprints_[name], base.of(name))) {
        identical.push_back(name);
      } else {
        measured.push_back(name);
        std::vector<std::string> found = fingerprint_differences(head_fingerprints_[name], base.of(name));
        changed[name] = fingerprint_difference(found);
        changed_from_base_[name] = changed_from_base(std::move(found), base.of(name));
      }
    }
    if (options_.audit_cases) {
      for (const std::string& name : identical)
        if (options_.audit_cases->contains(name)) audited_.insert(name);
    } else {
      std::vector<std::string> drawn = identical;
      std::mt19937_64 draw(options_.audit_seed);
      std::shuffle(drawn.begin(), drawn.end(), draw);
      const std::size_t audits = audit_count(identical.size(), fb_.audit_share);
      audited_.insert(drawn.begin(),
                      drawn.begin() + static_cast<std::ptrdiff_t>(std::min(audits, drawn.size())));
    }
    for (const std::string& name : identical) {
      if (!audited_.contains(name)) skipped_.push_back(name);
    }
    std::vector<std::string> timed;
    for (const std::string& name : all_) {
      if (!changed.contains(name) && !audited_.contains(name)) continue;
      timed.push_back(name);
    }
    all_ = timed;
    result_.details["fingerprints"] = {
        {"identical", identical.size()},
        {"not_timed", skipped_.size()},
        {"audited", std::vector<std::string>(audited_.begin(), audited_.end())},
        {"changed", changed},
        {"seconds", fingerprint_seconds_}};
    log("full_bench " + bench_.name + ": " + std::to_string(identical.size()) + " of " +
        std::to_string(identical.size() + measured.size()) + " case(s) run identical code on both sides (" +
        std::to_string(skipped_.size()) + " not timed, " + std::to_string(audited_.size()) + " audited); " +
        std::to_string(measured.size()) + " changed or without a fingerprint, timed");
    log_changed(changed);
  }

  // Why each changed case is timed, where a person reads the job's progress.
  void log_changed(const json& changed) const {
    constexpr std::size_t kListed = 20;
    std::size_t listed = 0;
    for (const auto& [name, why] : changed.items()) {
      if (++listed > kListed) {
        log("full_bench " + bench_.name + ": and " + std::to_string(changed.size() - kListed) +
            " more changed (the report's changed_from_base)");
        break;
      }
      log("full_bench " + bench_.name + ": " + name + " changed: " + why.get<std::string>());
    }
  }

  // A fresh order for each replicate: the cases (the adapter passes the seed
  // on where the harness orders them itself) and the groups they run in.
  PassRequest request_for(const std::vector<std::string>& names, Side side, bool baselines) const {
    PassRequest request;
    request.order_seed = (seed_ + 7919 * static_cast<std::uint64_t>(pass_number_) + (side == Side::base)) | 1;
    std::mt19937_64 shuffle(request.order_seed);
    request.cases = names;
    std::shuffle(request.cases.begin(), request.cases.end(), shuffle);
    request.groups = groups_;
    std::shuffle(request.groups.begin(), request.groups.end(), shuffle);
    request.baselines = baselines;
    return request;
  }

  // One replicate of `names` on both sides (head only without a base), in
  // ABBA order across replicates. Every replicate times the candidate alone,
  // on both sides: no side sits in a power state that baselines made, and
  // main and pull-request runs measure alike.
  void replicate(const std::vector<std::string>& names) {
    std::vector<Side> sides{Side::head};
    if (ab_)
      sides =
          pass_number_ % 2 == 0 ? std::vector{Side::head, Side::base} : std::vector{Side::base, Side::head};
    for (Side side : sides) {
      if (stop_.load()) return;
      const BenchContext side_context = context(side);
      if (aliases_) drop_cached_pages(side_context.checkout / bench_.path);
      PassOutput pass = adapter_.measure(side_context, request_for(names, side, false));
      take(side, pass, names);
    }
    ++pass_number_;
  }

  void take(Side side, PassOutput& pass, const std::vector<std::string>& names) {
    const char* side_name = side == Side::head ? "head" : "base";
    result_.seconds += pass.seconds;
    case_sides_ += static_cast<double>(names.empty() ? pass.cases.size() : names.size());
    if (pass.ok && pass.seconds > 0) cheapest_pass_s_ = std::min(cheapest_pass_s_, pass.seconds);
    setup_seconds_ += pass.setup_seconds;
    measure_seconds_ += pass.measure_seconds;
    unread_seconds_ += pass.unread_seconds;
    if (!pass.unread.empty()) unread_ = pass.unread;
    passes_.push_back({{"side", side_name},
                       {"cases", names.empty() ? pass.cases.size() : names.size()},
                       {"seconds", pass.seconds}});
    if (pass.result_seconds > 0) passes_.back()["result_seconds"] = pass.result_seconds;
    for (std::string& note : pass.notes) {
      if (notes_.insert(note).second) log(bench_.name + ": " + note);
    }
    if (!pass.failure.empty()) {
      failures_ += std::string(failures_.empty() ? "" : "; ") + side_name + " pass " +
                   std::to_string(pass_number_) + ": " + pass.failure;
      result_.log_tail += "--- " + std::string(side_name) + " pass\n" + pass.log_tail;
      if (side == Side::head) head_failed_ = true;
    }
    if (!pass.ok) return;
    if (result_.device.is_null() && pass.device.is_object()) result_.device = pass.device;
    const std::set<std::string> wanted(names.begin(), names.end());
    for (const json& c : pass.cases) {
      if (!c.contains("measurements")) continue;  // a failed case
      const std::string name = c["name"];
      if (!wanted.empty() && !wanted.contains(name)) continue;  // ran with its group
      auto [it, fresh] = cases_.try_emplace(name, json::object());
      if (fresh) {
        order_.push_back(name);
        it->second["name"] = name;
        it->second["params"] = c.value("params", json::object());
        if (discover_ && side == Side::head) all_.push_back(name);
      }
      std::int64_t& index = (side == Side::head ? head_counts_ : base_counts_)[name];
      merge_replicate(it->second, c, index, side == Side::head ? "measurements" : "base_measurements");
      ++index;
    }
  }

  // Both sides' first processes, before the first pass: the base's import
  // while the head's first pass runs.
  void prepare_both_sides() {
    if (ab_) adapter_.prepare_passes(context(Side::base));
    adapter_.prepare_passes(context(Side::head));
  }

  // The minimum replicates of every case.
  void first_pass() {
    if (all_.empty() && !discover_) return;  // nothing changed, nothing audited
    prepare_both_sides();
    for (int r = 0; r < fb_.replicates && !stop_.load(); ++r) {
      replicate(discover_ && r == 0 ? std::vector<std::string>{} : all_);
      progress("replicate " + std::to_string(r + 1) + " of every case");
      if (head_failed_ && cases_.empty()) break;
    }
  }

  // More replicates of the cases whose level is still uncertain, while the
  // budget allows a pass of them.
  void adaptive_passes() {
    for (int r = fb_.replicates; r < fb_.max_replicates && !stop_.load(); ++r) {
      std::vector<std::string> uncertain;
      for (const std::string& name : order_) {
        if (head_counts_[name] < fb_.replicates) continue;  // failed in the first pass
        if (standard_error(cases_[name], ab_) > fb_.target_se) uncertain.push_back(name);
      }
      if (uncertain.empty()) break;
      const double pass_estimate = result_.seconds / std::max(1, pass_number_) *
                                   static_cast<double>(uncertain.size()) /
                                   static_cast<double>(std::max<std::size_t>(1, all_.size()));
      if (result_.seconds + pass_estimate > budget_s_) {
        progress(std::to_string(uncertain.size()) + " case(s) above the target spread, budget spent");
        break;
      }
      replicate(uncertain);
      progress("replicate " + std::to_string(r + 1) + " of " + std::to_string(uncertain.size()) +
               " case(s) above the target spread");
    }
  }

  // A/B: each case measured on both sides, tested as the server will test it
  // (with the project's detection settings and the default noise; the
  // server's is learned), and its threshold.
  struct AbTests {
    std::vector<std::string> names;
    std::vector<common::CaseTest> tests;
    std::vector<double> thresholds;
    std::vector<double> side_offsets;  // the noise model's, relative to the base's level
  };
  // Whether resolve_replicates a side could decide an inconclusive case,
  // were its estimate to stay: the replicates' share of its variance shrinks
  // with their number, the between-side offset's does not. A tiny kernel
  // whose offset alone keeps its interval past the resolution stays
  // inconclusive, and no replicate is spent on it.
  static bool decidable(const common::CaseTest& test, double threshold, std::int64_t now, int cap,
                        double side_offset) {
    const common::DetectionSettings settings;
    if (test.se <= 0) return false;
    const double quantile = (std::log(test.upper) - std::log(test.lower)) / (2 * test.se);
    const double fixed_var = 2 * side_offset * side_offset;
    const double shrinking_var = std::max(0.0, test.se * test.se - fixed_var);
    const double half = quantile * std::sqrt(fixed_var + shrinking_var * static_cast<double>(now) / cap);
    const double effect = std::abs(test.effect);
    const bool flaggable = effect > std::log1p(threshold) && effect > half;
    const bool rules_out =
        effect <= std::log1p(threshold) && effect + half <= std::log1p(settings.resolution * threshold);
    return flaggable || rules_out;
  }

  AbTests ab_tests() {
    const common::DetectionSettings& settings = options_.detection;
    // Screen as the server will judge: by the one threshold precedence.
    auto threshold_of = [&](const std::string& name) {
      const double project =
          options_.project_thresholds
              ? options_.project_thresholds->for_case(name).value_or(settings.min_threshold)
              : settings.min_threshold;
      return common::case_threshold(name, {project, "project setting"}, config_.thresholds, "",
                                    options_.base_thresholds, "")
          .value;
    };
    AbTests out;
    for (const std::string& name : order_) {
      Replicates head = candidate_replicates(cases_[name], "measurements");
      Replicates base = candidate_replicates(cases_[name], "base_measurements");
      if (head.locations.empty() || base.locations.empty()) continue;
      const common::NoiseModel noise = common::noise_for(common::default_noise(), head.rule);
      out.names.push_back(name);
      out.tests.push_back(
          common::test_ab(head.locations, base.locations, noise, settings, head.clocks, base.clocks));
      out.thresholds.push_back(threshold_of(name));
      out.side_offsets.push_back(noise.side_offset_ns / common::location(base.locations));
    }
    return out;
  }

  // A/B: a case the first pass screens as changed is measured again; the
  // run is judged on all its replicates.
  void confirm() {
    if (!ab_ || fb_.confirm_replicates <= 0 || stop_.load()) return;
    const AbTests ab = ab_tests();
    std::vector<std::string> screened;
    for (std::size_t i = 0; i < ab.names.size(); ++i) {
      if (common::needs_confirmation(ab.tests[i], ab.thresholds[i], options_.detection))
        screened.push_back(ab.names[i]);
    }
    if (!screened.empty()) {
      for (const std::string& name : screened) cases_[name]["first_pass_replicates"] = head_counts_[name];
      for (int r = 0; r < fb_.confirm_replicates && !stop_.load(); ++r) replicate(screened);
      progress(std::to_string(screened.size()) + " case(s) screened by the first pass measured again");
    }
    result_.details["confirmed_cases"] = screened;
  }

  // A/B: a case the run's decision would leave inconclusive (common::
  // open_question) gets two more replicates a side at a time, in ABBA order,
  // until it is decided, it has resolve_replicates a side, more could not
  // decide it, or the budget cannot pay for the next round. Those still open
  // are named: the server says inconclusive, not unchanged.
  void resolve() {
    if (!ab_ || stop_.load()) return;
    std::vector<std::string> open;
    for (int round = 1; !stop_.load(); ++round) {
      const AbTests ab = ab_tests();
      const common::Decision decision = common::decide(ab.tests, ab.thresholds, options_.detection);
      open.clear();
      std::vector<std::string> buy;  // those more replicates can still decide
      for (std::size_t i = 0; i < ab.names.size(); ++i) {
        if (decision.statuses[i] != common::ChangeStatus::inconclusive) continue;
        open.push_back(ab.names[i]);
        const std::int64_t now = head_counts_[ab.names[i]];
        if (now + 2 <= fb_.resolve_replicates &&
            decidable(ab.tests[i], ab.thresholds[i], now, fb_.resolve_replicates, ab.side_offsets[i]))
          buy.push_back(ab.names[i]);
      }
      if (buy.empty()) break;
      // Two passes a side of these cases; a pass costs at least what the
      // cheapest one did (a python harness's start-up).
      const double per_case_side = result_.seconds / std::max<double>(1, case_sides_);
      const double round_estimate =
          4 * std::max(cheapest_pass_s_, per_case_side * static_cast<double>(buy.size()));
      if (result_.seconds + round_estimate > budget_s_) {
        progress(std::to_string(open.size()) + " inconclusive case(s), budget spent");
        break;
      }
      replicate(buy);
      replicate(buy);
      progress("round " + std::to_string(round) + ": 2 more replicates a side of " +
               std::to_string(buy.size()) + " inconclusive case(s)");
    }
    result_.details["inconclusive_cases"] = open;
  }

  // Context for the speedup series and the machine-drift signal of a run
  // judged against its history: the head's baseline implementations, one
  // replicate, after the candidate's. An A/B run is judged against its base,
  // measured in the same job, and skips it.
  void context_pass() {
    if (!fb_.context_pass || ab_ || stop_.load() || with_baselines_.empty()) return;
    ++pass_number_;
    PassOutput pass = adapter_.measure(context(Side::head), request_for(with_baselines_, Side::head, true));
    result_.seconds += pass.seconds;
    passes_.push_back(
        {{"side", "head baselines"}, {"cases", with_baselines_.size()}, {"seconds", pass.seconds}});
    if (pass.ok) {
      for (const json& c : pass.cases) {
        auto it = cases_.find(c.value("name", ""));
        if (it != cases_.end() && c.contains("measurements"))
          merge_replicate(it->second, c, 0, "measurements");
      }
    }
    progress("baseline implementations of the head, one replicate");
  }

  // The measured cases in the bench's own order (a harness that interleaves
  // its cases reports them in any order), then any it did not list; then
  // the cases identical to the base, not timed.
  void collect_cases() {
    std::vector<std::string> in_order = all_;
    for (const std::string& name : order_) {
      if (std::find(all_.begin(), all_.end(), name) == all_.end()) in_order.push_back(name);
    }
    for (const std::string& name : in_order) {
      if (!cases_.contains(name)) continue;
      json& c = cases_[name];
      // A case without a full set of head replicates keeps what it has; one
      // whose base never ran is judged against the stored history instead.
      if (c.contains("base_measurements") && !c.contains("measurements")) c.erase("base_measurements");
      if (!c.contains("measurements")) continue;
      // Audited where both sides were measured: a failed base pass leaves it
      // judged against its history, as any case.
      if (audited_.contains(name) && c.contains("base_measurements")) c["audit"] = true;
      // Every case's fingerprint, whatever the job: a harness whose cases
      // come from full_bench (Google Benchmark) has it from the launch pass.
      if (auto it = head_fingerprints_.find(name); it != head_fingerprints_.end() && !it->second.is_null())
        c["fingerprint"] = it->second;
      else if (options_.head_fingerprints && !options_.head_fingerprints->of(name).is_null())
        c["fingerprint"] = options_.head_fingerprints->of(name);
      if (auto it = changed_from_base_.find(name); it != changed_from_base_.end())
        c["changed_from_base"] = it->second;
      result_.cases.push_back(std::move(c));
    }
    for (const std::string& name : skipped_) {
      result_.cases.push_back(
          {{"name", name}, {"identical_to_base", true}, {"fingerprint", head_fingerprints_[name]}});
    }
  }

  std::string summary() const {
    std::int64_t fewest = INT64_MAX, most = 0;
    for (const auto& [_, n] : head_counts_) {
      fewest = std::min(fewest, n);
      most = std::max(most, n);
    }
    std::string message =
        bench_.name + ": " + std::to_string(result_.cases.size() - skipped_.size()) + " cases, " +
        (head_counts_.empty() ? "0" : std::to_string(fewest)) + "-" + std::to_string(most) + " replicates" +
        (ab_ ? " of base and head alternating" : "") + " in " + fixed(result_.seconds, 1) + " s";
    if (!skipped_.empty())
      message += "; " + std::to_string(skipped_.size()) + " identical to the base, not timed";
    if (!audited_.empty()) message += "; " + std::to_string(audited_.size()) + " identical, audited";
    if (unread_seconds_ > 0) message += "; " + fixed(unread_seconds_, 1) + " s of it " + unread_;
    for (const std::string& note : notes_) message += "; " + note;
    if (const std::string unseen = adapter_.unobserved(); !unseen.empty())
      message += "; not observed: " + unseen;
    return message;
  }

  BenchResult finish() {
    collect_cases();
    result_.seconds += fingerprint_seconds_;
    result_.details["passes"] = passes_;
    // Where the candidate passes' time went: per-case setup (allocations,
    // inputs, warm-up) against timed rounds; the rest is process start-up.
    result_.details["setup_seconds"] = setup_seconds_;
    result_.details["measure_seconds"] = measure_seconds_;
    if (unread_seconds_ > 0) result_.details["unread_seconds"] = unread_seconds_;
    result_.details["ab"] = ab_;
    result_.details["seconds"] = result_.seconds;
    result_.details["harness"] = adapter_.harness();
    if (prepared_ && prepared_->used() > 0) result_.details["prepared_passes"] = prepared_->used();
    if (!notes_.empty()) result_.details["notes"] = std::vector<std::string>(notes_.begin(), notes_.end());
    if (failures_.empty() && !stop_.load()) {
      result_.message = summary();
    } else {
      result_.status = "failed";
      result_.message = bench_.name + ": " + (stop_.load() ? std::string("stopped") : failures_);
    }
    return std::move(result_);
  }

  const BenchAdapter& adapter_;
  const BenchConfig& bench_;
  const RepoConfig& config_;
  const EngineOptions& options_;
  const std::atomic<bool>& stop_;
  const FullBenchConfig& fb_;
  const bool ab_;
  const std::unique_ptr<SideAliases> aliases_;
  const double budget_s_;
  const std::uint64_t seed_;
  // Python replicate processes started ahead of their turn; the idle ones
  // end with the engine (or with the pipeline that started them).
  std::shared_ptr<PreparedPasses> prepared_ = options_.prepared ? options_.prepared
                                              : fb_.prepare_processes
                                                  ? std::make_shared<PreparedPasses>(stop_)
                                                  : nullptr;

  BenchResult result_;
  std::vector<std::string> all_;             // every case measured
  std::vector<std::string> with_baselines_;  // those with baseline implementations
  std::vector<std::string> groups_;
  bool discover_ = false;
  std::map<std::string, json> cases_;                              // accumulated, by name
  std::vector<std::string> order_;                                 // first-seen order, for the report
  std::map<std::string, std::int64_t> head_counts_, base_counts_;  // replicates so far
  std::string failures_;
  std::set<std::string> notes_;
  double unread_seconds_ = 0;
  std::string unread_;
  json passes_ = json::array();
  int pass_number_ = 0;
  double setup_seconds_ = 0, measure_seconds_ = 0;
  double case_sides_ = 0;              // cases measured, summed over passes
  double cheapest_pass_s_ = INFINITY;  // of the passes that measured
  bool head_failed_ = false;
  std::map<std::string, json> head_fingerprints_;  // of the cases listed, A/B with skip_identical
  std::map<std::string, json> changed_from_base_;  // of the timed cases whose code is not the base's
  std::vector<std::string> skipped_;               // identical to the base, not timed
  std::set<std::string> audited_;                  // identical to the base, timed anyway
  double fingerprint_seconds_ = 0;                 // the launch passes that took the fingerprints
};

}  // namespace

std::size_t audit_count(std::size_t identical, double share) {
  if (identical == 0 || share <= 0) return 0;
  return std::max<std::size_t>(1,
                               static_cast<std::size_t>(std::ceil(share * static_cast<double>(identical))));
}

double job_audit_share(double configured, const json& asked) {
  if (configured <= 0 || !asked.is_object() || !asked.contains("share") || !asked["share"].is_number())
    return configured;
  return std::clamp(asked["share"].get<double>(), configured, 1.0);
}

std::uint64_t audit_seed(std::optional<std::int64_t> job_id, const std::string& commit,
                         const std::optional<std::string>& base_commit) {
  // FNV-1a: the same bytes give the same seed on every host and build.
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](std::string_view bytes) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  };
  if (job_id) {
    mix("job " + std::to_string(*job_id));
  } else {
    mix(commit);
    mix(" ");
    mix(base_commit.value_or(""));
  }
  return hash;
}

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
      into.push_back(fresh_measurement(m));
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
  if (pass_case.contains("gpu_state")) merge_gpu_state(accumulated, pass_case["gpu_state"]);
}

BenchResult run_full_bench(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
                           const EngineOptions& options) {
  static const std::atomic<bool> never{false};
  return Engine(adapter, bench, config, options, options.stop ? *options.stop : never).run();
}

}  // namespace kw::agent
