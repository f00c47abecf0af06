#include "service/ingest_service.hpp"

#include <cmath>
#include <future>
#include <memory>
#include <thread>

#include "errors.hpp"
#include "kw/common/in_parts.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/shard_merge.hpp"
#include "service/bisect_service.hpp"
#include "service/job_service.hpp"
#include "service/judging.hpp"

namespace kw::server {

namespace {

// What merging shard reports holds per byte of their JSON text, at its
// peak: the texts, their documents (a report's JSON value takes 4 to 7.4
// times its text: kReportJsonMemory) and the run parsed from the merge.
constexpr std::size_t kMergeMemoryPerByte = 8;

// An integer-valued number counts as that integer (run-report.md), so 168.0
// and 168 must make the same identity: such floats become integers.
void integral_floats_as_integers(nlohmann::json& value) {
  if (value.is_number_float()) {
    const double number = value.get<double>();
    constexpr double kInt64Bound = 9.2e18;
    if (std::trunc(number) == number && std::abs(number) < kInt64Bound)
      value = static_cast<std::int64_t>(number);
  } else if (value.is_structured()) {
    for (auto& item : value) integral_floats_as_integers(item);
  }
}

// The identity of a report: its validated document in CBOR, keys sorted
// (nlohmann keeps objects ordered) and numbers as their values, so a
// re-post, however formatted, matches. A tenth of the time of printing it
// as JSON.
std::string identity_of(nlohmann::json& document) {
  integral_floats_as_integers(document);
  std::string cbor;
  nlohmann::json::to_cbor(document, cbor);
  return cbor;
}

// A 10,000-case report's document, cases and judgement take 100 ms to free:
// after the answer, not before it.
template <typename... Parts>
void free_after_answer(std::size_t cases, Parts&&... parts) {
  constexpr std::size_t kLargeReportCases = 1000;
  if (cases >= kLargeReportCases) std::thread([](auto&&...) {}, std::forward<Parts>(parts)...).detach();
}

// What the rule makes of each case, before anything is stored (the store
// writes it as it is), the cases summarized on every core.
std::vector<common::CaseSummary> summarize(const common::RunReport& report) {
  const common::DetectionSettings rule;
  std::vector<common::CaseSummary> summaries;
  summaries.reserve(report.cases.size());
  for (auto& part : common::in_parts(report.cases.size(), 256, [&](std::size_t begin, std::size_t end) {
         std::vector<common::CaseSummary> summarized;
         for (std::size_t i = begin; i < end; ++i)
           summarized.push_back(common::summarize_case(report.cases[i], rule));
         return summarized;
       })) {
    for (common::CaseSummary& summary : part) summaries.push_back(std::move(summary));
  }
  return summaries;
}

}  // namespace

IngestResult IngestService::ingest(nlohmann::json document, const Caller& caller,
                                   std::optional<std::int64_t> job_id) {
  const auto started = std::chrono::steady_clock::now();
  common::RunReport report = common::parse_run_report(document);
  caller.require_project(report.project);
  if (job_id) {
    if (report.job_id && *report.job_id != *job_id) {
      throw Unprocessable(
          "inconsistent", "job_id",
          "is " + std::to_string(*report.job_id) + " but the URL names job " + std::to_string(*job_id));
    }
    report.job_id = job_id;
  } else if (report.job_id) {
    throw Unprocessable(
        "inconsistent", "job_id",
        "a job's report goes to POST /api/v1/jobs/" + std::to_string(*report.job_id) + "/report");
  } else if (report.shard) {
    throw Unprocessable(
        "inconsistent", "shard",
        "one shard's report is no run: it goes to its shard's job, or `kw merge-shards` makes "
        "one run of every shard's report");
  }
  observe(Phase::validate, std::chrono::steady_clock::now() - started);
  if (job_id) {
    if (auto taken = take_shard(document, report, caller, *job_id)) return *taken;
  }
  return store_and_judge(std::move(document), std::move(report), &caller, job_id, JobCheck::held_by_agent);
}

std::optional<IngestResult> IngestService::take_shard(const nlohmann::json& document,
                                                      const common::RunReport& report, const Caller& caller,
                                                      std::int64_t job_id) {
  auto taken = in_transaction(store_, [&](RunTransaction& tx) -> std::optional<ShardReceipt> {
    JobTransaction& queue = tx.queue();
    auto hold = queue.lock(job_id);
    if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
    if (hold->kind != "shard") {
      if (report.shard)
        throw Unprocessable("inconsistent", "shard",
                            "job " + std::to_string(job_id) + " is not split into shards");
      return std::nullopt;
    }
    const std::string shard_name =
        "shard " + std::to_string(hold->shard_index) + " of " + std::to_string(hold->shards);
    if (!report.shard || report.shard->index + 1 != hold->shard_index || report.shard->count != hold->shards)
      throw Unprocessable("inconsistent", "shard",
                          "job " + std::to_string(job_id) + " is " + shard_name + " of job " +
                              std::to_string(*hold->parent_job_id) + "; the report is " +
                              (report.shard ? "shard " + common::to_string(*report.shard) : "no shard's"));
    if (hold->project_id != queue.existing_project_id(report.project))
      throw Unprocessable("inconsistent", "project", "does not match job " + std::to_string(job_id));
    if (hold->commit != report.commit)
      throw Unprocessable(
          "inconsistent", "commit",
          "is " + report.commit + " but job " + std::to_string(job_id) + " is for " + hold->commit);
    const std::int64_t agent_id = queue.registered_agent(report.agent.name, caller);
    if (hold->state != "running" || hold->agent_id != agent_id) {
      // A retry of a report already taken is answered as before, to the
      // agent that sent it alone.
      auto stored = queue.shard_report(job_id);
      nlohmann::json posted = document;
      if (!stored || hold->agent_id != agent_id || identity_of(*stored) != identity_of(posted))
        throw Conflict("job_not_held", "agent \"" + report.agent.name + "\" does not hold job " +
                                           std::to_string(job_id) + " (" + shard_name + ", state " +
                                           hold->state + ")");
    } else {
      queue.store_shard_report(job_id, document);
    }
    const ShardProgress progress = queue.shard_progress(*hold->parent_job_id);
    return ShardReceipt{*hold->parent_job_id, hold->shard_index, hold->shards,
                        progress.waiting_for, progress.state,    progress.error};
  });
  if (!taken) return std::nullopt;
  IngestResult result;
  if (taken->waiting_for.empty() && taken->state != "failed") result = merge_shards(taken->job_id);
  ShardReceipt receipt = *taken;
  if (result.shard) {  // the job as the merge left it
    receipt.state = result.shard->state;
    receipt.error = result.shard->error;
  }
  result.shard = receipt;
  return result;
}

IngestResult IngestService::merge_shards(std::int64_t job_id) {
  ShardProgress progress =
      in_transaction(store_, [&](RunTransaction& tx) { return tx.queue().shard_progress(job_id); });
  IngestResult result;
  result.shard =
      ShardReceipt{job_id,
                   0,
                   static_cast<std::int64_t>(progress.waiting_for.size() + progress.reports.size()),
                   progress.waiting_for,
                   progress.state,
                   progress.error};
  if (!progress.waiting_for.empty() || progress.reports.empty() || progress.state == "failed") return result;
  auto fail = [&](const std::string& reason) {
    in_transaction(store_, [&](RunTransaction& tx) { fail_unmerged_job(tx.queue(), job_id, reason); });
    result.shard->state = "failed";
    result.shard->error = reason;
    return result;
  };
  // The merge takes its share of the memory request bodies share, as a
  // report of the same size would: the shards' texts, their documents and
  // the run parsed from them. Without it now, the reaper merges later.
  std::size_t text_bytes = 0;
  for (const std::string& text : progress.reports) text_bytes += text.size();
  const std::size_t need = text_bytes * kMergeMemoryPerByte;
  common::MemoryLease lease(memory_);
  if (memory_ != nullptr && need > memory_->capacity())
    return fail("its shards' reports need about " + std::to_string(need) +
                " bytes to merge, more than the server's --body-memory (" +
                std::to_string(memory_->capacity()) + ")");
  try {
    lease.take(need);
  } catch (const common::MemoryBusy&) {
    result.shard->error = "merging once the server's memory for reports is free";
    return result;
  }
  common::MergedShards merged;
  try {
    std::vector<nlohmann::json> reports;
    reports.reserve(progress.reports.size());
    for (std::string& text : progress.reports) {
      reports.push_back(nlohmann::json::parse(text));
      std::string().swap(text);
    }
    merged = common::merge_shards(std::move(reports));
  } catch (const common::ValidationError& error) {
    return fail(std::string("its shards' reports do not make one run: ") + error.what());
  }
  merged.document["job_id"] = job_id;
  merged.report.job_id = job_id;
  IngestResult stored = store_and_judge(std::move(merged.document), std::move(merged.report), nullptr, job_id,
                                        JobCheck::shards_done);
  stored.shard = result.shard;
  stored.shard->state = "done";
  return stored;
}

std::optional<StoredRun> IngestService::check_job(RunTransaction& tx, std::int64_t project_id,
                                                  const common::RunReport& report,
                                                  const std::string& canonical, const Caller* caller,
                                                  std::int64_t job_id, JobCheck check) {
  auto hold = tx.queue().lock(job_id);
  if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
  if (hold->kind != "measure")
    throw Conflict("not_a_measurement_job", "job " + std::to_string(job_id) + " is a " + hold->kind +
                                                " job: its result goes to POST /api/v1/jobs/" +
                                                std::to_string(job_id) + "/profile");
  if (hold->project_id != project_id)
    throw Unprocessable("inconsistent", "project", "does not match job " + std::to_string(job_id));
  if (hold->commit != report.commit) {
    throw Unprocessable(
        "inconsistent", "commit",
        "is " + report.commit + " but job " + std::to_string(job_id) + " is for " + hold->commit);
  }
  bool holds = hold->state == "running";
  std::string holder = "its shards";
  if (check == JobCheck::held_by_agent) {
    std::int64_t agent_id = tx.queue().registered_agent(report.agent.name, *caller);
    holds = holds && hold->agent_id == agent_id;
    holder = "agent \"" + report.agent.name + "\"";
  }
  if (holds) return std::nullopt;
  // A retry of a report that was already accepted is answered as before.
  if (auto previous = tx.find_stored(project_id, canonical)) return previous;
  throw Conflict("job_not_held", holder + " do" + (check == JobCheck::held_by_agent ? "es" : "") +
                                     " not hold job " + std::to_string(job_id) + " (state " + hold->state +
                                     ")");
}

void IngestService::after_judged(RunTransaction& tx, const StoredRun& run,
                                 std::optional<std::int64_t> job_id) const {
  BisectAfterRun bisect;
  if (job_id) {
    tx.queue().complete(*job_id);
    bisect = BisectService::after_run(tx.queue().bisects(), *job_id, run.run_id);
  }
  // A bisect's step is measured against the range's good end: its verdict is
  // the bisect's to use, not a status for that commit.
  if (!bisect.step) tx.verdict_announced(run.run_id);
  // Why its worst case got slower, from the hardware's counters.
  if (!bisect.step && run.verdict == "regression") tx.profile_regression(run.run_id, max_attempts_);
  if (bisect.finished) tx.queue().bisect_ended(*bisect.finished);
  tx.advance_case_heads(run.run_id);
}

IngestResult IngestService::store_and_judge(nlohmann::json document, common::RunReport report,
                                            const Caller* caller, std::optional<std::int64_t> job_id,
                                            JobCheck check) {
  using Clock = std::chrono::steady_clock;
  auto mark = Clock::now();
  // The time since the last mark, to `phase`.
  auto spent = [&](Phase phase) {
    const auto now = Clock::now();
    observe(phase, now - mark);
    mark = now;
  };
  // Detection only reads earlier runs, so it runs on a second connection
  // while this one stores the report.
  auto planned = std::async(std::launch::async, [&] {
    const auto started = Clock::now();
    auto reads =
        in_transaction(store_, [&](RunTransaction& tx) { return tx.judging_reads(report.project, report); });
    auto judgement = judge_run(std::move(reads), report);
    observe(Phase::plan, Clock::now() - started);
    return judgement;
  });
  std::shared_ptr<const RunJudgement> judgement;  // taken once, even if the transaction is retried
  if (job_id) document["job_id"] = *job_id;
  // The summaries are made while the identity is: neither reads the other.
  auto summarized = std::async(std::launch::async, [&report] { return summarize(report); });
  const std::string canonical = identity_of(document);
  spent(Phase::identity);
  const std::vector<common::CaseSummary> summaries = summarized.get();
  spent(Phase::summarize);

  StoredRun stored = in_transaction(store_, [&](RunTransaction& tx) {
    std::int64_t project_id = tx.queue().existing_project_id(report.project);
    if (job_id) {
      if (auto previous = check_job(tx, project_id, report, canonical, caller, *job_id, check))
        return *previous;
    } else {
      // A run outside the queue still comes from an agent bound to this token.
      tx.queue().bind_agent(report.agent.name, *caller, report.agent.host, report.agent.version,
                            nlohmann::json::array());
    }
    StoredRun result = tx.store(project_id, report, summaries, document, canonical, job_id);
    spent(Phase::store);
    if (!result.duplicate) {
      if (!judgement) judgement = planned.get();
      spent(Phase::wait);
      result.verdict = tx.store_judgement(result, *judgement);
      spent(Phase::finish);
      after_judged(tx, result, job_id);
      spent(Phase::after);
    }
    return result;
  });
  spent(Phase::commit);
  // This server's next read of the project sees the run without waiting for
  // the change feed to hear the commit.
  if (!stored.duplicate) store_.committed(report.project);
  free_after_answer(report.cases.size(), std::move(document), std::move(report), std::move(judgement));
  return {stored.run_id, stored.verdict, stored.duplicate, std::nullopt};
}

ReaperPass reaper_pass(JobService& jobs, IngestService& ingest) {
  ReaperPass pass{jobs.reap(), {}};
  for (std::int64_t job : jobs.unmerged_shard_jobs()) pass.merged.emplace_back(job, ingest.merge_shards(job));
  return pass;
}

}  // namespace kw::server
