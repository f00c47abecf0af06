#include "ingest/ingest_service.hpp"

#include <cmath>
#include <future>
#include <memory>
#include <thread>

#include "errors.hpp"
#include "kw/common/run_report.hpp"
#include "store/bisect_repository.hpp"
#include "store/detection_repository.hpp"
#include "store/job_repository.hpp"
#include "store/profile_repository.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

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

}  // namespace

IngestResult IngestService::ingest(nlohmann::json document, const Caller& caller,
                                   std::optional<std::int64_t> job_id) {
  using Clock = std::chrono::steady_clock;
  auto mark = Clock::now();
  // The time since the last mark, to `phase`.
  auto spent = [&](Phase phase) {
    const auto now = Clock::now();
    observe(phase, now - mark);
    mark = now;
  };
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
  }
  // Detection only reads earlier runs, so it runs on a second connection
  // while this one stores the report.
  spent(Phase::validate);
  auto planned = std::async(std::launch::async, [&] {
    const auto started = Clock::now();
    auto result = with_transaction(
        pool_, [&](pqxx::work& tx) { return DetectionRepository::plan(tx, report.project, report); });
    observe(Phase::plan, Clock::now() - started);
    return result;
  });
  std::shared_ptr<const DetectionRepository::Plan> plan;  // taken once, even if the transaction is retried
  if (job_id) document["job_id"] = *job_id;
  const std::string canonical = identity_of(document);
  spent(Phase::identity);

  StoredRun stored = with_transaction(pool_, [&](pqxx::work& tx) {
    std::int64_t project_id = RunRepository::require_project(tx, report.project);
    if (job_id) {
      auto hold = JobRepository::lock(tx, *job_id);
      if (!hold) throw NotFound("no_such_job", "no job " + std::to_string(*job_id));
      if (hold->kind != "measure")
        throw Conflict("not_a_measurement_job", "job " + std::to_string(*job_id) + " is a " + hold->kind +
                                                    " job: its result goes to POST /api/v1/jobs/" +
                                                    std::to_string(*job_id) + "/profile");
      if (hold->project_id != project_id)
        throw Unprocessable("inconsistent", "project", "does not match job " + std::to_string(*job_id));
      if (hold->commit != report.commit) {
        throw Unprocessable(
            "inconsistent", "commit",
            "is " + report.commit + " but job " + std::to_string(*job_id) + " is for " + hold->commit);
      }
      std::int64_t agent_id = JobRepository::registered_agent(tx, report.agent.name, caller);
      bool holds = hold->state == "running" && hold->agent_id == agent_id;
      if (!holds) {
        // A retry of a report that was already accepted is answered as before.
        if (auto previous = RunRepository::find_stored(tx, project_id, canonical)) return *previous;
        throw Conflict("job_not_held", "agent \"" + report.agent.name + "\" does not hold job " +
                                           std::to_string(*job_id) + " (state " + hold->state + ")");
      }
    } else {
      // A run outside the queue still comes from an agent bound to this token.
      JobRepository::bind_agent(tx, report.agent.name, caller, report.agent.host, report.agent.version,
                                nlohmann::json::array());
    }
    StoredRun result = RunRepository::store(tx, project_id, report, document, canonical, job_id);
    spent(Phase::store);
    if (!result.duplicate) {
      if (!plan) plan = planned.get();
      spent(Phase::wait);
      RunRepository::store_cases(tx, result, DetectionRepository::case_statuses(*plan));
      result.verdict = DetectionRepository::finish(tx, result.run_id, *plan, report);
      spent(Phase::finish);
      BisectRepository::AfterRun bisect;
      if (job_id) {
        JobRepository::complete(tx, *job_id);
        bisect = BisectRepository::after_run(tx, *job_id, result.run_id);
      }
      // A bisect's step is measured against the range's good end: its
      // verdict is the bisect's to use, not a status for that commit.
      if (!bisect.step) NotificationRepository::verdict(tx, notifications_, result.run_id);
      // Why its worst case got slower, from the hardware's counters.
      if (!bisect.step && result.verdict == "regression")
        ProfileRepository::after_regression(tx, result.run_id, max_attempts_);
      if (bisect.finished) NotificationRepository::bisect_ended(tx, notifications_, *bisect.finished);
      RunRepository::advance_case_heads(tx, result.run_id);
      spent(Phase::after);
    }
    return result;
  });
  spent(Phase::commit);
  // This server's next read of the project sees the run without waiting for
  // the change feed to hear the commit.
  if (!stored.duplicate) reads_.committed(report.project);
  free_after_answer(report.cases.size(), std::move(document), std::move(report), std::move(plan));
  return {stored.run_id, stored.verdict, stored.duplicate};
}

}  // namespace kw::server
