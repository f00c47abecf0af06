// The run, upload and bisect stores' contracts on PgRunStore, PgUploadStore and PgBisectStore over
// a test database: the SQL the in-memory stand-in stands for; and the documents both read back of the
// same reports, compared member by member, so a run the stand-in shows is
// the run kw-server shows.
#include "../../tests/support/report_factory.hpp"
#include "bisect_store_contract.hpp"
#include "in_memory_store.hpp"
#include "run_store_contract.hpp"
#include "server_fixture.hpp"
#include "store/profile_repository.hpp"
#include "upload_store_contract.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

std::vector<Statement> run_statements() {
  std::vector<Statement> statements;
  for (auto part : {TokenRepository::statements(), RunRepository::statements(), JobRepository::statements(),
                    DetectionRepository::statements(), ProfileRepository::statements()})
    statements.insert(statements.end(), part.begin(), part.end());
  return statements;
}

class PgHarness {
 public:
  RunStore& runs() { return runs_; }
  UploadStore& uploads() { return uploads_; }
  JobStore& jobs() { return jobs_; }
  BisectStore& bisects() { return bisects_; }
  std::int64_t add_project(const std::string& name) {
    return with_transaction(pool_,
                            [&](pqxx::work& tx) { return *RunRepository::create_project(tx, name, "main"); });
  }
  // Claims begun `seconds` earlier than they were, as a clock moved on would see them.
  void age_upload_claims(double seconds) {
    with_transaction(pool_, [&](pqxx::work& tx) {
      tx.exec_params0("UPDATE uploads SET completing_since = completing_since - make_interval(secs => $1)",
                      seconds);
    });
  }
  Caller token(const std::string& name, Scope scope) {
    return with_transaction(pool_, [&](pqxx::work& tx) {
      return *TokenRepository::authenticate(tx, TokenRepository::create(tx, name, scope, std::nullopt));
    });
  }

 private:
  TestDatabase database_;
  ConnectionPool pool_{database_.url(), 3, run_statements()};
  ReadCache cache_;
  ReadRouting reads_{pool_, cache_};
  NotifierOptions notifications_;
  PgRunStore runs_{pool_, reads_, notifications_};
  PgJobStore jobs_{pool_, notifications_};
  PgUploadStore uploads_{pool_};
  PgBisectStore bisects_{pool_};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, RunStoreContract, PgHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, UploadStoreContract, PgHarness);
INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, BisectStoreContract, PgHarness);

// Both stores, fed the same reports.
class BothStores : public ::testing::Test {
 protected:
  BothStores() {
    pg_.add_project("demo");
    memory_.create_project("demo", "main");
    pg_agent_ = pg_.token("agent-1", Scope::agent);
    memory_agent_ = *memory_.authenticate(memory_.create_token("agent-1", Scope::agent, std::nullopt).first);
  }

  // The report stored in both: the same run id in each.
  std::int64_t post(const json& document) {
    const IngestResult in_pg = pg_ingest_.ingest(document, pg_agent_, std::nullopt);
    const IngestResult in_memory = memory_ingest_.ingest(document, memory_agent_, std::nullopt);
    EXPECT_EQ(in_pg.run_id, in_memory.run_id);
    EXPECT_EQ(in_pg.verdict, in_memory.verdict) << "run " << in_pg.run_id;
    return in_pg.run_id;
  }

  // `read` of each store, as JSON.
  template <typename Read>
  std::pair<json, json> both(Read&& read) {
    return {in_transaction(pg_.runs(), read), in_transaction(static_cast<RunStore&>(memory_), read)};
  }

  PgHarness pg_;
  InMemoryStore memory_;
  IngestService pg_ingest_{pg_.runs(), 3};
  IngestService memory_ingest_{memory_, 3};
  Caller pg_agent_, memory_agent_;
};

// What PostgreSQL writes as a timestamp of its own, or formats its own way.
json without_timestamps(json document) {
  for (const char* key : {"created_at", "started_at", "finished_at"}) document.erase(key);
  if (document["git"].is_object()) document["git"].erase("committed_at");
  if (document["acknowledgement"].is_object()) document["acknowledgement"].erase("at");
  return document;
}

// By implementation: their order is no part of what judging reads.
json measurements_json(const std::vector<common::Measurement>& measured) {
  json by_impl = json::object();
  for (const common::Measurement& m : measured)
    by_impl[m.impl] = {m.samples_ns,
                       m.median_ns,
                       m.throttled_samples,
                       m.replicates,
                       m.sm_mhz,
                       m.energy_j,
                       common::to_string(m.replicate_location)};
  return by_impl;
}

json history_json(const std::map<std::string, common::CaseHistory>& history) {
  json by_case = json::object();
  for (const auto& [name, h] : history) {
    json clocks = json::array();
    for (const common::RunClock& c : h.clocks) clocks.push_back({c.mhz, c.sxx, c.sxy, c.replicates});
    by_case[name] = {h.run_ids, h.locations, h.replicate_counts, h.replicate_sds, clocks};
  }
  return by_case;
}

json reads_json(const RunJudgingReads& reads) {
  json baselines = json::object(), measured = json::object();
  for (const auto& [name, b] : reads.baselines) baselines[name] = {b.run_id, b.commit, b.case_id, b.reason};
  for (const auto& [id, m] : reads.base_measurements) measured[std::to_string(id)] = measurements_json(m);
  return {{"project", {reads.project.id, reads.project.name, reads.project.default_branch}},
          {"baselines", baselines},
          {"measurements", measured},
          {"history", history_json(reads.history)}};
}

// Every member a report can carry that the store keeps: replicates, their
// clocks and energy, throttled samples, launch durations, the GPU's state,
// a first pass, and the commit's git facts.
json rich_report(const kw::testing::ReportSpec& spec, const std::string& tree, std::mt19937_64& rng) {
  json document = kw::testing::make_report(spec);
  std::uniform_real_distribution<double> mhz(1650, 1980), joules(1e-4, 2e-4);
  for (json& c : document["cases"]) {
    c["launches"][0]["duration_ns"] = 12345.678;
    c["gpu_state"] = {{"sm_mhz", {1980, 1755}}, {"mem_mhz", {2619, 2619}}, {"throttle_reasons", 4}};
    c["first_pass_replicates"] = 2;
    for (const char* side : {"measurements", "base_measurements"}) {
      if (!c.contains(side)) continue;
      for (json& m : c[side]) {
        json clocks = json::array();
        for (std::size_t i = 0; i < m["samples_ns"].size(); ++i) clocks.push_back(std::round(mhz(rng)));
        m["sm_mhz"] = clocks;
        if (m["impl"] != "candidate" || !m.contains("replicates")) continue;
        std::set<std::int64_t> replicates(m["replicates"].begin(), m["replicates"].end());
        m["energy_j"] = json::array();
        m["energy_replicates"] = json::array();
        m["power_w"] = json::array();
        for (std::int64_t r : replicates) {
          m["energy_j"].push_back(joules(rng));
          m["energy_replicates"].push_back(r);
          m["power_w"].push_back(612.25);
        }
      }
    }
  }
  document["git"] = {{"tree", tree},
                     {"parents", {kw::testing::make_commit(900)}},
                     {"author", "A. Author <a@example.com>"},
                     {"subject", "tile 128"},
                     {"committed_at", "2026-11-20T09:00:00Z"}};
  return document;
}

TEST_F(BothStores, TheStandInReadsRunsBackAsPostgresDoes) {
  std::mt19937_64 rng(5);
  std::uint64_t seed = 1;
  auto spec = [&](std::uint64_t commit) {
    kw::testing::ReportSpec made;
    made.commit = kw::testing::make_commit(commit);
    made.seed = seed++;
    made.replicates = 3;
    made.throttled = 2;
    made.baselines = 2;
    return made;
  };
  std::vector<std::int64_t> runs;
  for (std::uint64_t commit = 1; commit <= 3; ++commit)
    runs.push_back(post(rich_report(spec(commit), std::string(40, 'a'), rng)));
  kw::testing::ReportSpec slower = spec(4);
  slower.slowdown = 1.3;
  const std::int64_t regression = post(rich_report(slower, std::string(40, 'b'), rng));
  runs.push_back(regression);
  kw::testing::ReportSpec pr = spec(5);
  pr.branch = "pr-1";
  pr.base_commit = kw::testing::make_commit(3);
  pr.ab = true;
  pr.slowdown = 1.1;
  runs.push_back(post(rich_report(pr, std::string(40, 'c'), rng)));
  kw::testing::ReportSpec broken = spec(6);
  broken.failed_stage = "load";
  runs.push_back(post(kw::testing::make_report(broken)));
  kw::testing::ReportSpec old_agent;  // no replicates, no clocks, no git
  old_agent.commit = kw::testing::make_commit(7);
  old_agent.seed = seed++;
  runs.push_back(post(kw::testing::make_report(old_agent)));
  auto [pg_ack, memory_ack] = both([&](RunTransaction& t) {
    const auto acknowledged = *t.acknowledge(regression, "ci", "intended");
    return json{acknowledged.previous_verdict, acknowledged.carried_to};
  });
  EXPECT_EQ(pg_ack, memory_ack);
  kw::testing::ReportSpec same_tree = slower;
  same_tree.commit = kw::testing::make_commit(8);
  same_tree.branch = "pr-2";
  runs.push_back(post(rich_report(same_tree, std::string(40, 'b'), rng)));

  for (std::int64_t run : runs) {
    auto [pg_head, memory_head] = both([&](RunTransaction& t) {
      return json::parse(t.run_head(run, Page{1, 2})->json);
    });
    EXPECT_EQ(without_timestamps(pg_head), without_timestamps(memory_head))
        << "run " << run << ": " << json::diff(without_timestamps(pg_head), without_timestamps(memory_head));
    auto [pg_rows, memory_rows] =
        both([&](RunTransaction& t) { return json::parse(t.run_comparisons_json(run, 0, 9)); });
    EXPECT_EQ(pg_rows, memory_rows) << "run " << run << ": " << json::diff(pg_rows, memory_rows);
    auto [pg_cases, memory_cases] =
        both([&](RunTransaction& t) { return json::parse(t.run_cases_json(run, 0, 9)); });
    EXPECT_EQ(pg_cases, memory_cases) << "run " << run << ": " << json::diff(pg_cases, memory_cases);
  }
  const common::RunReport next = common::parse_run_report(rich_report(pr, std::string(40, 'd'), rng));
  auto [pg_reads, memory_reads] =
      both([&](RunTransaction& t) { return reads_json(t.judging_reads("demo", next)); });
  EXPECT_EQ(pg_reads, memory_reads) << json::diff(pg_reads, memory_reads);

  const std::string base = kw::testing::make_commit(3), head = kw::testing::make_commit(5);
  auto [pg_pairs, memory_pairs] = both([&](RunTransaction& t) {
    json pairs = json::array();
    for (const CommitRuns& r : t.commit_runs(1, base, head, "")) {
      const CrossRunReads cross = t.cross_run_reads(t.queue().project_settings(1), r, "");
      json cases = json::array();
      for (const auto& c : cross.cases)
        cases.push_back({c.name, measurements_json(c.head), measurements_json(c.base)});
      json thresholds = json::object();
      for (const auto& [name, judged] : cross.judged_thresholds)
        thresholds[name] = {judged.first, judged.second};
      pairs.push_back({r.gpu, r.head_run, r.base_run.value_or(0), r.base_in_job, r.head_rule_version, cases,
                       history_json(cross.history), thresholds, t.judged_times(r.head_run, "").first});
    }
    return pairs;
  });
  EXPECT_EQ(pg_pairs, memory_pairs) << json::diff(pg_pairs, memory_pairs);
}

}  // namespace
}  // namespace kw::server::testing
