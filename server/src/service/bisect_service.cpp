#include "service/bisect_service.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "errors.hpp"
#include "service/job_store.hpp"
#include "service/ownership.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

// A step measured and failed, retried as often as any job.
constexpr int kStepAttempts = 3;
// Room for skipped commits over the binary search's own steps.
constexpr int kSpareSteps = 4;

void finish(Bisect& b, const std::string& state, std::string message) {
  b.state = state;
  b.message = std::move(message);
  if (state == "found") b.first_bad = b.commits[static_cast<std::size_t>(b.bad)];
}

// The next step queued, or the bisect ended: the first bad commit is found
// when no untested commit is left between the good end and the bad one.
// Returns true when it ended.
bool next_step(BisectTransaction& tx, Bisect& b) {
  std::vector<int> open;
  for (int i = b.good + 1; i < b.bad; ++i)
    if (!b.skipped.contains(i)) open.push_back(i);
  if (open.empty()) {
    std::string message = "first bad commit " + b.commits[static_cast<std::size_t>(b.bad)].substr(0, 12) +
                          " after " + std::to_string(b.steps) + " step(s)";
    if (b.bad - b.good > 1)
      message += ", or one of the " + std::to_string(b.bad - b.good - 1) +
                 " commit(s) before it that could not be measured";
    finish(b, "found", message);
    return true;
  }
  if (b.steps >= b.max_steps) {
    finish(b, "failed", "gave up after " + std::to_string(b.steps) + " steps (max_steps)");
    return true;
  }
  const double middle = (b.good + b.bad) / 2.0;
  const int mid = *std::min_element(
      open.begin(), open.end(), [&](int x, int y) { return std::abs(x - middle) < std::abs(y - middle); });
  NewJob job;
  job.project_id = b.project_id;
  job.commit = b.commits[static_cast<std::size_t>(mid)];
  job.branch = "kernelwatch/bisect-" + std::to_string(b.id);
  job.base_commit = b.commits[static_cast<std::size_t>(b.good)];
  job.gpu_class = b.gpu_class;
  job.max_attempts = kStepAttempts;
  job.rerun = true;  // its own measurement, whatever else measured that commit
  job.bisect_id = b.id;
  if (job.branch == tx.default_branch(b.project_id)) job.branch += "-step";
  tx.queue_step(job);
  ++b.steps;
  return false;
}

int index_of(const Bisect& b, const std::string& commit) {
  auto at = std::find(b.commits.begin(), b.commits.end(), commit);
  return at == b.commits.end() ? -1 : static_cast<int>(at - b.commits.begin());
}

// A step's commit, judged: bad when any of the bisect's cases regressed
// against the good end; skipped when it did not build, or failed with
// nothing regressed.
void judge_step(Bisect& b, const BisectRunFacts& run) {
  const int index = index_of(b, run.commit);
  if (index < 0) return;
  const bool regressed = std::any_of(run.regressed.begin(), run.regressed.end(), [&](const std::string& c) {
    return std::find(b.cases.begin(), b.cases.end(), c) != b.cases.end();
  });
  if (run.build_failed || (run.verdict == "failed" && !regressed)) {
    b.skipped.insert(index);
  } else if (regressed) {
    b.bad = std::min(b.bad, index);
  } else {
    b.good = std::max(b.good, index);
  }
}

// The bisect a run's regression starts: the range holds the good end and
// the pushed commits, so more than one commit was pushed.
std::optional<Bisect> bisect_of_regression(const BisectRunFacts& run) {
  if (!run.on_default_branch || run.verdict != "regression" || run.range.size() < 3 || run.regressed.empty())
    return std::nullopt;
  Bisect b;
  b.project_id = run.project_id;
  b.gpu_class = run.gpu_class;
  b.commits = run.range;
  b.cases = run.regressed;
  const int pushed = static_cast<int>(run.range.size()) - 1;
  b.good = 0;
  b.bad = pushed;
  b.max_steps = static_cast<int>(std::ceil(std::log2(pushed))) + kSpareSteps;
  return b;
}

json optional_json(const std::optional<std::string>& value) {
  return value ? json(*value) : json();
}

json document(const BisectView& view) {
  const Bisect& b = view.bisect;
  auto commit = [&](int index) { return b.commits.at(static_cast<std::size_t>(index)); };
  json skipped = json::array();
  for (int index : b.skipped) skipped.push_back(commit(index));
  json steps = json::array();
  for (const BisectStepRow& step : view.steps)
    steps.push_back({{"id", step.job_id},
                     {"commit", step.commit},
                     {"base_commit", optional_json(step.base_commit)},
                     {"state", step.state},
                     {"run_id", step.run_id ? json(*step.run_id) : json()},
                     {"verdict", optional_json(step.verdict)}});
  return {{"id", b.id},
          {"project", view.project},
          {"run_id", view.run_id},
          {"gpu_class", b.gpu_class},
          {"state", b.state},
          {"commits", b.commits},
          {"cases", b.cases},
          {"good", commit(b.good)},
          {"bad", commit(b.bad)},
          {"skipped", skipped},
          {"first_bad", optional_json(b.first_bad)},
          {"steps", b.steps},
          {"max_steps", b.max_steps},
          {"message", b.message.empty() ? json() : json(b.message)},
          {"created_at", view.created_at},
          {"updated_at", view.updated_at},
          {"jobs", steps}};
}

}  // namespace

BisectAfterRun BisectService::after_run(BisectTransaction& tx, std::int64_t job_id, std::int64_t run_id) {
  const BisectRunFacts run = tx.run_facts(job_id, run_id);
  BisectAfterRun result;
  std::optional<Bisect> b;
  if (run.bisect_id) {
    result.step = true;
    b = tx.load(*run.bisect_id);
    if (!b || b->state != "running") return result;
    judge_step(*b, run);
  } else {
    std::optional<Bisect> fresh = bisect_of_regression(run);
    if (!fresh) return result;
    const std::optional<std::int64_t> id = tx.create(*fresh, run_id);
    if (!id) return result;  // the run has its bisect already
    b = tx.load(*id);
  }
  if (next_step(tx, *b)) result.finished = b->id;
  tx.save(*b);
  return result;
}

std::optional<std::int64_t> BisectService::step_failed(BisectTransaction& tx, std::int64_t job_id) {
  const std::optional<BisectStepJob> step = tx.step_job(job_id);
  if (!step) return std::nullopt;
  std::optional<Bisect> b = tx.load(step->bisect_id);
  if (!b || b->state != "running") return std::nullopt;
  if (const int index = index_of(*b, step->commit); index >= 0) b->skipped.insert(index);
  const bool ended = next_step(tx, *b);
  tx.save(*b);
  if (ended) return b->id;
  return std::nullopt;
}

json BisectService::get(const Caller* caller, std::int64_t bisect_id) {
  return in_transaction(store_, [&](BisectTransaction& tx) {
    owned_bisect(tx, caller, bisect_id);
    return document(*tx.view(bisect_id));
  });
}

json BisectService::cancel(const Caller& caller, std::int64_t bisect_id) {
  return in_transaction(store_, [&](BisectTransaction& tx) {
    owned_bisect(tx, &caller, bisect_id);
    std::optional<Bisect> b = tx.load(bisect_id);
    if (b->state != "running")
      throw Conflict("bisect_ended", "bisect " + std::to_string(bisect_id) + " has ended (" + b->state + ")");
    finish(*b, "cancelled", "cancelled after " + std::to_string(b->steps) + " step(s)");
    tx.save(*b);
    tx.cancel_queued_steps(bisect_id, "its bisect was cancelled");
    return document(*tx.view(bisect_id));
  });
}

}  // namespace kw::server
