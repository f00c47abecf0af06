// Access through one door, service by service: every public method of every
// service that touches a project's data is called here by a token scoped to
// "demo" (an admin's, so that no scope check stands in for the project's)
// on "other"'s run, job, profile, bisect, upload, settings and tokens; each
// must refuse it (project_denied, or no_such_* as if it did not exist) and
// leave "other"'s data as it was. Methods that take no caller are listed in
// kNoCaller with why. tests/service_access_walk.py fails CI on a public
// service method named in neither table, so a new method is walked here
// before it ships. The routes' own walk is SecurityTest.EveryRouteScopeAndProject.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "../../tests/support/report_factory.hpp"
#include "error_of.hpp"
#include "kw/common/sha256.hpp"
#include "server_fixture.hpp"
#include "service/read_cache.hpp"
#include "services.hpp"
#include "store/token_repository.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

// Public service methods that take no caller, and why none is needed.
const std::map<std::string, std::string> kNoCaller = {
    {"IngestService::merge_shards", "the reaper's: a sharded job's reports, merged once all are in"},
    {"IngestService::set_body_memory", "kw-server's setup"},
    {"IngestService::observe", "the ingest phases' timing"},
    {"IngestService::seconds", "the ingest phases' timing, for /metrics"},
    {"JobService::settings", "the queue's lease and attempts"},
    {"JobService::reap", "the reaper's: leases run out"},
    {"JobService::unmerged_shard_jobs", "the reaper's: merges a stop interrupted"},
    {"BisectService::after_run", "inside the transaction that judged a job's run, after its ingest's check"},
    {"BisectService::step_failed", "inside the transaction that failed a job, after its holder's check"},
    {"RunService::comparisons", "takes a ReadableRun, which only head() makes, after its check"},
    {"RunService::cases", "takes a ReadableRun, which only head() makes, after its check"},
    {"UploadService::limits", "the server's limits on uploads"},
};

// Public service methods that show or take only the caller's projects'
// share instead of refusing: checked by what they answer.
const std::set<std::string> kFiltered = {"JobService::agents", "JobService::claim", "TokenService::list"};

class ServiceAccessWalk : public ::testing::Test {
 protected:
  static constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";

  void SetUp() override {
    with_transaction(pool_, [](pqxx::work& tx) {
      RunRepository::create_project(tx, "demo", "main");
      RunRepository::create_project(tx, "other", "main");
    });
    agent_ = token("agent", Scope::agent, std::nullopt);
    ci_ = token("ci", Scope::ci, std::nullopt);
    admin_ = token("admin", Scope::admin, std::nullopt);
    demo_ = token("demo-admin", Scope::admin, std::vector<std::string>{"demo"});
    other_token_ = with_transaction(pool_, [](pqxx::work& tx) {
                     return TokenRepository::authenticate(
                         tx, TokenRepository::create(tx, "other-reader", Scope::read,
                                                     std::vector<std::string>{"other"}));
                   })->token_id;

    kw::testing::ReportSpec spec;
    spec.project = "other";
    spec.commit = kw::testing::make_commit(1);
    run_ = services_.ingest.ingest(kw::testing::make_report(spec), agent_, std::nullopt).run_id;
    NewJob job;
    job.commit = kw::testing::make_commit(2);
    job.branch = "main";
    job_ = services_.jobs.create(ci_, "other", job).second["id"];
    EXPECT_EQ((*services_.jobs.claim(agent_, claim_request()))["id"], job_);
    const json queued = services_.profiles.queue(ci_, profile_request()).second;
    profile_ = queued["id"];
    profile_job_ = queued["job_id"];
    bisect_ = with_transaction(pool_, [&](pqxx::work& tx) {
      return tx
          .exec_params1(
              "INSERT INTO bisects (project_id, run_id, gpu_class, commits, cases, good, bad, max_steps) "
              "SELECT id, $1, 'any', ARRAY[$2, $3, $4], ARRAY['attention.fwd/case0'], 0, 2, 5 FROM projects "
              "WHERE name = 'other' RETURNING id",
              run_, kw::testing::make_commit(3), kw::testing::make_commit(4), kw::testing::make_commit(5))[0]
          .as<std::int64_t>();
    });
    services_.uploads_in_parts.put_part(agent_, "other", "upload-1", 1, 2, part());
  }

  Caller token(const std::string& name, Scope scope,
               const std::optional<std::vector<std::string>>& projects) {
    return with_transaction(pool_, [&](pqxx::work& tx) {
      return *TokenRepository::authenticate(tx, TokenRepository::create(tx, name, scope, projects));
    });
  }
  ClaimRequest claim_request() const {
    ClaimRequest ask;
    ask.agent = "gpu-x";
    ask.host = "host";
    ask.version = "0.1.0";
    ask.gpus = json::array({kH100});
    ask.can_profile = true;
    return ask;
  }
  ProfileRequest profile_request() const {
    ProfileRequest profile;
    profile.run_id = run_;
    profile.case_name = "attention.fwd/case0";
    return profile;
  }
  PartBody part() const {
    static const std::string data = R"({"part": 1})";
    return PartBody{data, false, static_cast<std::int64_t>(data.size()), common::sha256_hex(data)};
  }
  // What "other" holds, to compare before and after the walk.
  std::string state_of_other() {
    return with_transaction(pool_, [](pqxx::work& tx) {
      return tx
          .exec1(
              "SELECT concat_ws('|', (SELECT string_agg(id || state || attempts, ',' ORDER BY id) FROM "
              "jobs), "
              "(SELECT string_agg(id || state, ',' ORDER BY id) FROM bisects), "
              "(SELECT string_agg(id || verdict || COALESCE(acknowledged_by, ''), ',' ORDER BY id) FROM "
              "runs), "
              "(SELECT string_agg(name || run_alpha, ',' ORDER BY id) FROM projects), "
              "(SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL), "
              "(SELECT count(*) FROM upload_parts))")[0]
          .as<std::string>();
    });
  }

  TestDatabase database_;
  ConnectionPool pool_{database_.url(), 3, all_statements()};
  ReadCache cache_;
  ReadRouting reads_{pool_, cache_};
  NotifierOptions notifications_;
  Services services_{pool_, reads_, notifications_, QueueSettings{60, 3}, UploadLimits{}};
  Caller agent_, ci_, admin_, demo_;
  std::int64_t other_token_ = 0, run_ = 0, job_ = 0, profile_ = 0, profile_job_ = 0, bisect_ = 0;
};

TEST_F(ServiceAccessWalk, EveryServiceMethodRefusesAnotherProjectsData) {
  Services& s = services_;
  const Caller& demo = demo_;
  const std::string before = state_of_other();
  StageProgress stage;
  stage.name = "build";
  stage.status = "passed";
  const std::map<std::string, std::function<void()>> walk = {
      {"BisectService::get", [&] { s.bisects.get(&demo, bisect_); }},
      {"BisectService::cancel", [&] { s.bisects.cancel(demo, bisect_); }},
      {"IngestService::ingest",
       [&] {
         kw::testing::ReportSpec spec;
         spec.project = "other";
         spec.commit = kw::testing::make_commit(9);
         s.ingest.ingest(kw::testing::make_report(spec), demo, std::nullopt);
       }},
      {"JobService::create", [&] { s.jobs.create(demo, "other", NewJob{}); }},
      {"JobService::get", [&] { s.jobs.get(&demo, job_); }},
      {"JobService::heartbeat", [&] { s.jobs.heartbeat(demo, job_, "gpu-x"); }},
      {"JobService::release", [&] { s.jobs.release(demo, job_, "gpu-x"); }},
      {"JobService::record_stage", [&] { s.jobs.record_stage(demo, job_, "gpu-x", stage); }},
      {"JobService::fail", [&] { s.jobs.fail(demo, job_, "gpu-x", "walked"); }},
      {"ProfileService::queue", [&] { s.profiles.queue(demo, profile_request()); }},
      {"ProfileService::of_run", [&] { s.profiles.of_run(&demo, run_); }},
      {"ProfileService::get", [&] { s.profiles.get(&demo, profile_); }},
      {"ProfileService::csv", [&] { s.profiles.csv(&demo, profile_, "head"); }},
      {"ProfileService::store_result", [&] { s.profiles.store_result(demo, profile_job_, "gpu-x", {}); }},
      {"RunService::head", [&] { s.runs.head(&demo, run_, Page{}); }},
      {"RunService::explanation", [&] { s.runs.explanation(&demo, run_, "attention.fwd/case0"); }},
      {"RunService::acknowledge", [&] { s.runs.acknowledge(demo, run_, "walked"); }},
      {"RunService::compare",
       [&] {
         s.runs.compare(&demo, "other", kw::testing::make_commit(1), kw::testing::make_commit(1), {}, Page{});
       }},
      {"SettingsService::create_project", [&] { s.settings.create_project(demo, "third", "main"); }},
      {"SettingsService::project", [&] { s.settings.project(&demo, "other"); }},
      {"SettingsService::update",
       [&] {
         s.settings.update(demo, "other", {{"run_alpha", 0.05}});
       }},
      {"TokenService::create",
       [&] { s.tokens.create(demo, "walked", Scope::read, std::vector<std::string>{"other"}); }},
      {"TokenService::revoke", [&] { s.tokens.revoke(demo, other_token_); }},
      {"UploadService::put_part",
       [&] { s.uploads_in_parts.put_part(demo, "other", "upload-1", 2, 2, part()); }},
      {"UploadService::state", [&] { s.uploads_in_parts.state(demo, "other", "upload-1"); }},
      {"UploadService::complete",
       [&] {
         s.uploads_in_parts.complete(demo, "other", "upload-1",
                                     [](const std::vector<StoredPartBody>&) { return json::object(); });
       }},
  };
  for (const auto& [method, call] : walk) {
    EXPECT_FALSE(kNoCaller.contains(method) || kFiltered.contains(method)) << method << " is in two tables";
    std::string message;
    const std::string code = error_of(call, &message);
    EXPECT_TRUE(code == "project_denied" || code.rfind("no_such_", 0) == 0)
        << method << " answered a token scoped to \"demo\" on \"other\"'s data with \"" << code << "\" "
        << message;
  }
  EXPECT_EQ(state_of_other(), before) << "the walk changed \"other\"'s data";

  // kFiltered: lists and claims, filtered to the caller's projects, never refused.
  const json agents = json::parse(s.jobs.agents(&demo));
  ASSERT_EQ(agents.size(), 2U) << "the unscoped agents may run demo's jobs too: " << agents.dump();
  for (const json& agent : agents)
    EXPECT_EQ(agent["job"], nullptr) << "gpu-x runs \"other\"'s job, which demo's token is not shown";
  for (const json& listed : s.tokens.list(demo)) EXPECT_NE(listed["name"], "other-reader");
  // A claim takes jobs of the caller's projects alone.
  NewJob queued;
  queued.commit = kw::testing::make_commit(7);
  queued.branch = "main";
  s.jobs.create(ci_, "other", queued);
  const Caller demo_agent = token("demo-agent", Scope::agent, std::vector<std::string>{"demo"});
  ClaimRequest ask = claim_request();
  ask.agent = "demo-gpu";
  EXPECT_FALSE(s.jobs.claim(demo_agent, ask).has_value());
}

}  // namespace
}  // namespace kw::server::testing
