// The agent end to end: a temporary git repo whose bench is the kwbench CPU
// TEST DOUBLE (no GPU here), a real kw-server on embedded PostgreSQL, and
// `kw agent` processes claiming and reporting.
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "../support/e2e.hpp"
#include "../support/lossy_network.hpp"
#include "../support/report_factory.hpp"

namespace {

using namespace kw::testing;
using nlohmann::json;

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { work_dir_ = make_temp_dir("kw-e2e-agent"); }
  void TearDown() override {
    agents_.clear();
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }

  void start_server(std::vector<std::string> args = {}) {
    server_ = std::make_unique<ServerUnderTest>(std::move(args));
    server_->start();
    server_->project("demo");
    agent_token_ = server_->token("agent", "gpu-hosts");
    ci_token_ = server_->token("ci", "ci");
  }

  std::int64_t submit(const std::string& commit) {
    auto response = server_->client(ci_token_).post(
        "/api/v1/jobs", {{"project", "demo"}, {"commit", commit}, {"branch", "main"}});
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["id"];
  }

  // `gpu_double`: the agent takes the kwbench CPU TEST DOUBLE for a GPU;
  // without it, this machine has none.
  ChildProcess& start_agent(const std::string& name, bool once = true, bool gpu_double = true,
                            const std::vector<std::string>& more = {}) {
    std::vector<std::string> argv = {KW_BINARY,        "agent",
                                     "--server",       server_->url(),
                                     "--token",        agent_token_,
                                     "--work-dir",     (work_dir_ / name).string(),
                                     "--repo",         "demo=" + repo_.dir().string(),
                                     "--name",         name,
                                     "--poll-seconds", "0.5"};
    if (gpu_double) argv.insert(argv.end(), {"--gpu-test-double", "kwbench CPU test double"});
    if (once) argv.push_back("--once");
    argv.insert(argv.end(), more.begin(), more.end());
    agents_.push_back(std::make_unique<ChildProcess>(argv));
    return *agents_.back();
  }

  json run_of(const json& job) {
    return server_->client().get("/api/v1/runs/" + std::to_string(job["run_id"].get<int>())).json();
  }

  fs::path work_dir_;
  TrackedRepo repo_;
  std::unique_ptr<ServerUnderTest> server_;
  std::string agent_token_, ci_token_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(AgentE2eTest, AgentClaimsRunsAndReports) {
  start_server();
  std::int64_t job = submit(repo_.commit("first"));
  ChildProcess& agent = start_agent("host-a");
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
  EXPECT_EQ(done["verdict"], "pass");
  json run = run_of(done);
  ASSERT_EQ(run["stages"].size(), 6u);
  for (const json& stage : run["stages"]) EXPECT_EQ(stage["status"], "passed") << stage.dump();
  EXPECT_EQ(run["gpu_model"], "kwbench CPU test double");
  EXPECT_EQ(run["cases"].size(), 2u);
  // Progress lines for every stage.
  for (const char* line : {"claimed job", "stage build started", "stage load passed",
                           "stage full_bench passed", "delivered job-"}) {
    EXPECT_NE(agent.output().find(line), std::string::npos) << line << "\n" << agent.output();
  }
}

// One agent's jobs of a branch build in the branch's tree: the second
// commit's build starts from the first's outputs.
TEST_F(AgentE2eTest, TheNextCommitOfABranchBuildsIncrementallyInItsTree) {
  start_server();
  std::string commits[2], trees[2];
  for (int i = 0; i < 2; ++i) {
    if (i == 1) repo_.write("README.md", "the second commit\n");
    commits[i] = repo_.commit(i == 0 ? "first" : "second");
    std::int64_t job = submit(commits[i]);
    ChildProcess& agent = start_agent("host-a");
    EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
    json run = run_of(wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; }));
    const json& tree = run["stages"][0]["details"]["tree"];
    if (i == 0) {
      EXPECT_EQ(tree, (json{{"kind", "fresh"}}));
    } else {
      EXPECT_EQ(tree, (json{{"kind", "incremental"}, {"from", commits[0]}}));
    }
    std::size_t at = agent.output().find("building in ");
    ASSERT_NE(at, std::string::npos) << agent.output();
    trees[i] = agent.output().substr(at, agent.output().find('\n', at) - at);
  }
  EXPECT_NE(trees[1].find("main's tree"), std::string::npos) << trees[1];
}

// A Google Benchmark repository on a host without a GPU (this one): the
// agent builds it against the installed library, runs its CPU benchmarks
// and skips only what needs a GPU; the device is the host's CPU, and the
// second commit is judged against the first.
TEST_F(AgentE2eTest, GoogleBenchmarkRepositoryWithoutAGpuGetsARealVerdict) {
  start_server();
  repo_.write("bench.cpp", R"(#include <benchmark/benchmark.h>
#include <numeric>
#include <vector>
static void BM_sum(benchmark::State& state) {
  std::vector<double> values(static_cast<std::size_t>(state.range(0)), 1.0);
  for (auto _ : state) benchmark::DoNotOptimize(std::accumulate(values.begin(), values.end(), 0.0));
}
BENCHMARK(BM_sum)->Arg(4096);
BENCHMARK_MAIN();
)");
  json config{
      {"project", "demo"},
      {"build",
       {{"commands", {"c++ -O2 -std=c++17 -o bench bench.cpp -lbenchmark -lpthread"}}, {"timeout_s", 120}}},
      {"benches",
       {{{"name", "cpu"},
         {"path", "bench"},
         {"format", "gbench"},
         {"args", {"--benchmark_repetitions=5", "--benchmark_min_time=0.02"}},
         {"check",
          {{"command", {"sh", "-c", "./bench --benchmark_filter=BM_sum --benchmark_min_time=0.001"}}}}}}}};
  repo_.write("kernelwatch.json", config.dump(2));
  json runs[2];
  for (int i = 0; i < 2; ++i) {
    if (i == 1) repo_.write("README.md", "docs only\n");
    std::int64_t job = submit(repo_.commit(i == 0 ? "a gbench repository" : "docs only"));
    ChildProcess& agent = start_agent("cpu-host-" + std::to_string(i), true, false);
    EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
    json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
    runs[i] = run_of(done);
  }
  const json& second = runs[1];
  EXPECT_EQ(second["device"]["kind"], "cpu") << second["device"];
  EXPECT_EQ(second["gpu_model"], runs[0]["gpu_model"]);
  EXPECT_EQ(second["stages"][1]["status"], "passed") << second["stages"][1];
  EXPECT_EQ(second["stages"][1]["message"],
            "cpu: its symbols resolve; kernel images not checked: no CUDA device");
  EXPECT_EQ(second["stages"][2]["message"], "no CUDA device");
  EXPECT_EQ(second["stages"][3]["status"], "passed") << second["stages"][3];  // its check command
  EXPECT_EQ(second["stages"][5]["status"], "passed") << second["stages"][5];
  ASSERT_EQ(second["cases"].size(), 1u);
  EXPECT_EQ(second["cases"][0]["name"], "cpu/BM_sum/4096");
  // Judged: against the first run, with the between-run prior (CPU timing
  // on a loaded runner may move, so the outcome itself is not asserted).
  EXPECT_NE(second["verdict"], "no-data");
  ASSERT_FALSE(second["comparisons"].empty());
  const json& c = second["comparisons"][0];
  EXPECT_EQ(c["method"], "baseline-run") << c.dump();
  EXPECT_EQ(c["baseline_run_id"], runs[0]["id"]) << c.dump();
}

// A bench whose library lost a symbol it calls (rebuilt after the bench was
// linked): lazily bound, it would list its benchmarks and fail only when
// one ran. The load stage binds every symbol at start and names it.
TEST_F(AgentE2eTest, AGoogleBenchmarkBenchWithAnUnresolvedSymbolFailsLoad) {
  start_server();
  repo_.write("helper.cpp",
              "#ifdef WITH_EXTRA\nint extra() { return 42; }\n#endif\nint helper() { return 1; }\n");
  repo_.write("bench.cpp", R"(#include <benchmark/benchmark.h>
int helper();
int extra();
static void BM_helper(benchmark::State& state) { for (auto _ : state) benchmark::DoNotOptimize(helper()); }
BENCHMARK(BM_helper);
static void BM_extra(benchmark::State& state) { for (auto _ : state) benchmark::DoNotOptimize(extra()); }
BENCHMARK(BM_extra);
BENCHMARK_MAIN();
)");
  json config{{"project", "demo"},
              {"build",
               {{"commands",
                 {"c++ -shared -fPIC -DWITH_EXTRA -o libhelper.so helper.cpp",
                  "c++ -O2 -std=c++17 -o bench bench.cpp -L. -lhelper -Wl,-rpath,'$ORIGIN' -Wl,-z,lazy "
                  "-lbenchmark -lpthread",
                  "c++ -shared -fPIC -o libhelper.so helper.cpp"}}}},
              {"benches", {{{"name", "cpu"}, {"path", "bench"}, {"format", "gbench"}}}}};
  repo_.write("kernelwatch.json", config.dump(2));
  std::int64_t job = submit(repo_.commit("a library that lost a symbol"));
  ChildProcess& agent = start_agent("cpu-host", true, false);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  json run = run_of(wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; }));
  const json& load = run["stages"][1];
  EXPECT_EQ(load["status"], "failed") << load;
  EXPECT_NE(
      load["message"].get<std::string>().find("cpu: does not start with every symbol bound (LD_BIND_NOW"),
      std::string::npos)
      << load["message"];
  EXPECT_NE(load["log_tail"].get<std::string>().find("undefined symbol: _Z5extrav"), std::string::npos)
      << load["log_tail"];
  EXPECT_EQ(run["stages"][5]["status"], "skipped") << run["stages"][5];
  EXPECT_EQ(run["verdict"], "failed");
}

// A bench of another harness whose correctness check fails: the check's
// own output is the stage's log, and nothing is timed.
TEST_F(AgentE2eTest, AGoogleBenchmarkBenchWhoseCheckFailsFailsCorrectness) {
  start_server();
  repo_.write("bench.cpp", R"(#include <benchmark/benchmark.h>
static void BM_nothing(benchmark::State& state) { for (auto _ : state) benchmark::ClobberMemory(); }
BENCHMARK(BM_nothing);
BENCHMARK_MAIN();
)");
  repo_.write("check.sh", "echo 'row 3: expected 1.5, got nan' >&2\nexit 1\n");
  json config{{"project", "demo"},
              {"build", {{"commands", {"c++ -O2 -std=c++17 -o bench bench.cpp -lbenchmark -lpthread"}}}},
              {"benches",
               {{{"name", "cpu"},
                 {"path", "bench"},
                 {"format", "gbench"},
                 {"check", {{"command", {"sh", "check.sh"}}, {"timeout_s", 30}}}}}}};
  repo_.write("kernelwatch.json", config.dump(2));
  std::int64_t job = submit(repo_.commit("a check that fails"));
  ChildProcess& agent = start_agent("cpu-host", true, false);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  json run = run_of(wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; }));
  const json& correctness = run["stages"][3];
  EXPECT_EQ(correctness["status"], "failed") << correctness;
  EXPECT_NE(correctness["message"].get<std::string>().find("check `sh` exited 1"), std::string::npos)
      << correctness["message"];
  EXPECT_NE(correctness["log_tail"].get<std::string>().find("row 3: expected 1.5, got nan"),
            std::string::npos)
      << correctness["log_tail"];
  EXPECT_EQ(run["stages"][5]["status"], "skipped") << run["stages"][5];
  EXPECT_TRUE(run["cases"].empty()) << run["cases"];
  EXPECT_EQ(run["verdict"], "failed");
}

TEST_F(AgentE2eTest, ServerDownMidRunSpoolsAndDeliversExactlyOnce) {
  start_server();
  repo_.write("kwbench-fake.json", R"({"sleep_stage": "full_bench", "sleep_seconds": 4})");
  fs::path marker = work_dir_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  std::int64_t job = submit(repo_.commit("slow full bench"));
  ChildProcess& agent = start_agent("host-a");
  unsetenv("KW_FAKE_SLEEP_FILE");
  agent.wait_for("stage full_bench started");
  server_->stop();     // down while the bench runs
  fs::remove(marker);  // the replicate under way is the bench's last slow one
  agent.wait_for("stays spooled");
  EXPECT_TRUE(fs::exists(work_dir_ / "host-a" / "spool" / ("job-" + std::to_string(job) + ".json")));
  server_->start();
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  EXPECT_NE(agent.output().find("the server answers: 1 spooled report(s) go now"), std::string::npos)
      << agent.output();
  EXPECT_NE(agent.output().find("delivered job-" + std::to_string(job)), std::string::npos) << agent.output();
  EXPECT_FALSE(fs::exists(work_dir_ / "host-a" / "spool" / ("job-" + std::to_string(job) + ".json")));
  json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
  json runs = server_->client().get("/api/v1/projects/demo/runs").json();
  EXPECT_EQ(runs.size(), 1u) << "delivered exactly once";
}

TEST_F(AgentE2eTest, KilledAgentsJobIsFinishedByAnotherAfterTheLeaseExpires) {
  start_server({"--lease-seconds", "2"});
  repo_.write("kwbench-fake.json", R"({"sleep_stage": "correctness", "sleep_seconds": 60})");
  fs::path marker = work_dir_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  std::int64_t job = submit(repo_.commit("hangs in correctness"));
  ChildProcess& first = start_agent("host-a");
  unsetenv("KW_FAKE_SLEEP_FILE");
  first.wait_for("stage correctness started");
  kill(-first.pid(), SIGKILL);  // the agent and its stage, as a host crash would
  first.signal(SIGKILL);
  first.wait_exit();
  fs::remove(marker);
  wait_for_job(*server_, job, [](const json& j) { return j["state"] == "queued"; });
  ChildProcess& second = start_agent("host-b");
  EXPECT_EQ(second.wait_exit(), 0) << second.output();
  json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
  EXPECT_EQ(done["attempts"], 2);
  EXPECT_EQ(run_of(done)["agent"]["name"], "host-b");
}

// `kw agent` on a host of two GPUs (two TEST DOUBLES here) runs one
// worker per GPU: two jobs at once, each worker an agent of its own. A GPU
// whose health check fails (the check is a TEST DOUBLE too: a script that
// reports ECC errors while a file exists) stops claiming, the agents list
// says why, and the other GPU takes the jobs.
TEST_F(AgentE2eTest, AHostWithTwoGpusRunsTwoJobsAtOnceAndAnUnhealthyGpuClaimsNone) {
  start_server();
  const fs::path check = work_dir_ / "gpu-check.sh";
  std::ofstream(check) << "if [ -e '" << work_dir_.string() << "/ecc-'\"$KW_GPU_UUID\" ]; then\n"
                       << "  passed=false; message='2 uncorrected ECC error(s) since the driver loaded'\n"
                       << "else passed=true; message='no uncorrected ECC error since the driver loaded'; fi\n"
                       << "printf '{\"uuid\": \"%s\", \"index\": %s, \"checks\": [{\"name\": \"ecc\", "
                          "\"passed\": %s, \"message\": \"%s\"}]}\\n' \"$KW_GPU_UUID\" \"$KW_GPU_INDEX\" "
                          "\"$passed\" \"$message\"\n";
  repo_.write("kwbench-fake.json", R"({"sleep_stage": "full_bench", "sleep_seconds": 60})");
  fs::path marker = work_dir_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  auto commit = [this](const std::string& message) {
    repo_.write("note.txt", message);
    return repo_.commit(message);
  };
  std::int64_t first = submit(commit("one"));
  std::int64_t second = submit(commit("two"));
  ChildProcess agent({KW_BINARY,
                      "agent",
                      "--server",
                      server_->url(),
                      "--token",
                      agent_token_,
                      "--work-dir",
                      (work_dir_ / "host").string(),
                      "--repo",
                      "demo=" + repo_.dir().string(),
                      "--name",
                      "host",
                      "--poll-seconds",
                      "0.3",
                      "--gpu-test-double",
                      "kwbench CPU test double",
                      "--gpu-test-double",
                      "kwbench CPU test double",
                      "--gpu-check",
                      "sh " + check.string(),
                      "--health-seconds",
                      "1"});
  unsetenv("KW_FAKE_SLEEP_FILE");
  auto running = [](const json& j) { return j["state"] == "running"; };
  json a = wait_for_job(*server_, first, running), b = wait_for_job(*server_, second, running);
  agent.wait_for(R"(\[host-gpu0\] \[kw [0-9:]+\] stage full_bench started)");
  agent.wait_for(R"(\[host-gpu1\] \[kw [0-9:]+\] stage full_bench started)");
  EXPECT_NE(a["agent"], b["agent"]) << "both GPUs measure at once";
  json agents = server_->client().get("/api/v1/agents").json();
  ASSERT_EQ(agents.size(), 2u) << agents.dump();
  for (const json& worker : agents) {
    EXPECT_EQ(worker["state"], "running") << worker.dump();
    EXPECT_EQ(worker["health"]["healthy"], true) << worker.dump();
  }
  EXPECT_EQ(agents[1]["name"], "host-gpu1");
  EXPECT_EQ(agents[1]["gpu"]["uuid"], "GPU-test-double-1");
  fs::remove(marker);
  for (std::int64_t job : {first, second})
    EXPECT_EQ(wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; })["verdict"],
              "pass");

  std::ofstream(work_dir_ / "ecc-GPU-test-double-1") << "x";
  agent.wait_for(R"(GPU GPU-test-double-1 failed its health check: ecc: 2 uncorrected ECC error\(s\))");
  std::int64_t third = submit(commit("three"));
  std::int64_t fourth = submit(commit("four"));
  for (std::int64_t job : {third, fourth}) {
    json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
    EXPECT_EQ(done["agent"], "host-gpu0") << "only the healthy GPU claims";
  }
  agents = server_->client().get("/api/v1/agents").json();
  EXPECT_EQ(agents[1]["state"], "unhealthy") << agents.dump();
  EXPECT_EQ(agents[1]["health"]["checks"][0]["message"],
            "2 uncorrected ECC error(s) since the driver loaded");

  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  EXPECT_NE(agent.output().find("agent stopped"), std::string::npos) << agent.output();
  // Checked every second while sick, said once.
  const std::string sick = "GPU GPU-test-double-1 failed its health check";
  const std::string log = agent.output();
  EXPECT_EQ(log.find(sick, log.find(sick) + 1), std::string::npos) << log;
}

// One job split over a host's two GPUs: each worker claims a shard, measures
// its half of the cases, and the server merges the halves into one run.
TEST_F(AgentE2eTest, AJobSplitInTwoIsMeasuredByBothGpusOfAHostAndJudgedOnce) {
  start_server();
  // Each shard's full_bench waits while the marker exists (at most 5 s): a
  // worker that finished its shard would otherwise take the other one too.
  repo_.write("kwbench-fake.json", R"({"sleep_stage": "full_bench", "sleep_seconds": 5})");
  const fs::path marker = work_dir_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  ChildProcess submit({KW_BINARY, "submit", "--project", "demo", "--commit", repo_.commit("sharded"),
                       "--branch", "main", "--shards", "2", "--wait", "--timeout", "120s", "--server",
                       server_->url(), "--token", ci_token_});
  submit.wait_for(R"(job [0-9]+ queued)");
  const std::int64_t job = std::stoll(
      std::regex_replace(submit.output(), std::regex(R"([\s\S]*job ([0-9]+) queued[\s\S]*)"), "$1"));
  ChildProcess agent({KW_BINARY, "agent", "--server", server_->url(), "--token", agent_token_, "--work-dir",
                      (work_dir_ / "host").string(), "--repo", "demo=" + repo_.dir().string(), "--name",
                      "host", "--poll-seconds", "0.3", "--gpu-test-double", "kwbench CPU test double",
                      "--gpu-test-double", "kwbench CPU test double"});
  unsetenv("KW_FAKE_SLEEP_FILE");
  agent.wait_for(R"(\[host-gpu0\] \[kw [0-9:]+\] stage full_bench started)");
  agent.wait_for(R"(\[host-gpu1\] \[kw [0-9:]+\] stage full_bench started)");
  fs::remove(marker);
  json done = wait_for_job(*server_, job,
                           [](const json& j) { return j["state"] == "done" || j["state"] == "failed"; });
  ASSERT_EQ(done["state"], "done") << done.dump() << agent.output();
  EXPECT_EQ(done["verdict"], "pass");
  std::set<std::string> agents;
  for (const json& shard : done["shard_jobs"]) {
    EXPECT_EQ(shard["state"], "done") << shard.dump();
    EXPECT_EQ(shard["cases"], 1) << "each shard measured half of the 2 cases";
    agents.insert(shard["agent"].get<std::string>());
  }
  EXPECT_EQ(agents, (std::set<std::string>{"host-gpu0", "host-gpu1"}));
  json run = run_of(done);
  EXPECT_EQ(run["cases"].size(), 2u);
  for (const json& stage : run["stages"]) EXPECT_EQ(stage["status"], "passed") << stage.dump();
  EXPECT_NE(agent.output().find("shard 1/2, 1 of its 2 cases"), std::string::npos) << agent.output();
  // kw submit --wait follows each shard's stages, then gives the verdict.
  EXPECT_EQ(submit.wait_exit(), 0) << submit.output();
  for (const char* line : {"shard 1/2 stage full_bench passed", "shard 2/2 stage full_bench passed"})
    EXPECT_NE(submit.output().find(line), std::string::npos) << line << "\n" << submit.output();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
}

// Without a queue: kw run measures each shard into a file, kw merge-shards
// makes the run, kw upload posts it.
TEST_F(AgentE2eTest, RunShardsMergeIntoOneRunThatUploads) {
  start_server();
  repo_.commit("for kw run --shard");
  std::vector<std::string> files;
  for (const char* shard : {"1/2", "2/2"}) {
    files.push_back((work_dir_ / ("shard-" + std::string(1, shard[0]) + ".json")).string());
    auto run = run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--shard", shard, "--out",
                            files.back(), "--gpu-test-double", "kwbench CPU test double"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::ifstream in(files.back());
    const json report = json::parse(in);
    EXPECT_EQ(report["cases"].size(), 1u) << shard;
    EXPECT_EQ(report["shard"]["count"], 2);
  }
  auto unmerged =
      run_command({KW_BINARY, "upload", files[0], "--server", server_->url(), "--token", agent_token_});
  EXPECT_NE(unmerged.output.find("kw merge-shards"), std::string::npos) << unmerged.output;
  EXPECT_EQ(
      run_command({KW_BINARY, "merge-shards", files[0], "--out", (work_dir_ / "x.json").string()}).exit_code,
      1)
      << "one shard of two is no run";
  const std::string merged = (work_dir_ / "run.json").string();
  auto merge = run_command({KW_BINARY, "merge-shards", files[1], files[0], "--out", merged});
  ASSERT_EQ(merge.exit_code, 0) << merge.output;
  EXPECT_NE(merge.output.find("2 cases from 2 shards"), std::string::npos) << merge.output;
  auto upload =
      run_command({KW_BINARY, "upload", merged, "--server", server_->url(), "--token", agent_token_});
  EXPECT_EQ(upload.exit_code, 0) << upload.output;
  EXPECT_NE(upload.output.find("verdict pass"), std::string::npos) << upload.output;
  EXPECT_NE(run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--shard", "3/2", "--out", merged})
                .exit_code,
            0);
}

// A regression's worst case is profiled under Nsight Compute by an agent
// that has it, and any case on demand; the profile is kept with the run. The
// ncu TEST DOUBLE runs the bench and prints real H100 ncu output whose kernel
// time the commit's slowdown scales.
TEST_F(AgentE2eTest, ARegressionsWorstCaseIsProfiledAndAnyCaseOnDemand) {
  start_server();
  const std::string base = repo_.commit("base");
  std::int64_t base_job = submit(base);
  EXPECT_EQ(start_agent("plain").wait_exit(), 0);
  wait_for_job(*server_, base_job, [](const json& j) { return j["state"] == "done"; });

  repo_.write("kwbench-fake.json", R"({"slowdown": 1.25})");
  const std::string slow = repo_.commit("slower");
  std::int64_t job = submit(slow);
  const fs::path calls = work_dir_ / "ncu-calls";
  setenv("KW_FAKE_NCU_CALLS", calls.c_str(), 1);
  ChildProcess& agent =
      start_agent("profiler", false, true, {"--ncu", KW_SOURCE_DIR "/tests/support/ncu_test_double.py"});
  unsetenv("KW_FAKE_NCU_CALLS");
  json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
  ASSERT_EQ(done["verdict"], "regression");
  const std::int64_t run_id = done["run_id"];
  json run = run_of(done);
  std::string worst;
  double most = 0;
  for (const json& c : run["comparisons"]) {
    if (c["kind"] == "time" && c["impl"] == "candidate" && c["status"] == "regression" && c["ratio"] > most) {
      most = c["ratio"];
      worst = c["case"];
    }
  }
  ASSERT_EQ(run["profiles"].size(), 1u) << run["profiles"].dump();
  EXPECT_EQ(run["profiles"][0]["case"], worst);
  EXPECT_EQ(run["profiles"][0]["reason"], "worst_regression");

  const std::string list = "/api/v1/runs/" + std::to_string(run_id) + "/profiles";
  auto profiles_done = [&](std::size_t n) {
    json profiles;
    for (int i = 0; i < 300; ++i) {
      profiles = server_->client().get(list).json();
      bool all = profiles.size() == n;
      for (const json& p : profiles) all = all && p["state"] == "done";
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return profiles;
  };
  json profiles = profiles_done(1);
  ASSERT_EQ(profiles[0]["state"], "done") << profiles.dump() << agent.output();
  const json& summary = profiles[0]["summary"];
  EXPECT_EQ(profiles[0]["base_commit"], base);
  EXPECT_EQ(summary["base"]["commit"], base);
  EXPECT_EQ(summary["head"]["commit"], slow);
  ASSERT_EQ(summary["head"]["kernels"].size(), 1u) << summary.dump();
  const json& head = summary["head"]["kernels"].begin().value();
  const json& before = summary["base"]["kernels"].begin().value();
  EXPECT_NEAR(head["time_us"].get<double>() / before["time_us"].get<double>(), 1.25, 1e-4);
  EXPECT_EQ(head["stalls"][0]["reason"], "wait");
  auto csv = server_->client().get("/api/v1/profiles/" + profiles[0]["id"].dump() + "/ncu/head");
  ASSERT_EQ(csv.status, 200);
  EXPECT_EQ(csv.body.rfind("\"ID\",", 0), 0u) << csv.body.substr(0, 200);

  // On demand: the other case, three launches; the same request again is the same profile.
  std::string other;
  for (const json& c : run["cases"]) {
    if (c["name"] != worst) other = c["name"];
  }
  json ask{{"case", other}, {"launch_count", 3}};
  auto queued = server_->client(ci_token_).post(list, ask);
  ASSERT_EQ(queued.status, 201) << queued.body;
  auto again = server_->client(ci_token_).post(list, ask);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["id"], queued.json()["id"]);
  profiles = profiles_done(2);
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0]["case"], other);
  EXPECT_EQ(profiles[0]["state"], "done") << profiles.dump();
  EXPECT_EQ(profiles[0]["reason"], "requested");
  EXPECT_EQ(profiles[0]["requested_by"], "ci");
  std::ifstream call_lines(calls);
  int launched_three = 0, calls_made = 0;
  for (std::string line; std::getline(call_lines, line); ++calls_made) {
    json argv = json::parse(line);
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      launched_three += argv[i] == "--launch-count" && argv[i + 1] == "3";
  }
  EXPECT_EQ(calls_made, 4) << "base and head of two profiles";
  EXPECT_EQ(launched_three, 2);

  // A profile's job is no measurement: the commit's measurement is still its job.
  auto resubmit = server_->client(ci_token_).post(
      "/api/v1/jobs", {{"project", "demo"}, {"commit", slow}, {"branch", "main"}});
  EXPECT_EQ(resubmit.status, 200);
  EXPECT_EQ(resubmit.json()["id"], job);
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  EXPECT_NE(agent.output().find("profile jobs: "), std::string::npos) << agent.output();
  EXPECT_NE(agent.output().find(".json: profile done"), std::string::npos) << agent.output();
}

TEST_F(AgentE2eTest, CommitThatDoesNotBuildFailsWithTheCompilerError) {
  start_server();
  repo_.write("build.sh",
              "echo 'attention_fwd.cu(88): error: identifier \"kBlockN\" is undefined' >&2\nexit 2\n");
  std::int64_t job = submit(repo_.commit("broken build"));
  ChildProcess& agent = start_agent("host-a");
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  json done = wait_for_job(*server_, job, [](const json& j) { return j["state"] == "done"; });
  EXPECT_EQ(done["verdict"], "failed");
  json run = run_of(done);
  EXPECT_EQ(run["stages"][0]["status"], "failed");
  EXPECT_EQ(run["stages"][0]["message"], "`sh build.sh` exited 2");
  EXPECT_NE(run["stages"][0]["log_tail"].get<std::string>().find("identifier \"kBlockN\" is undefined"),
            std::string::npos);
  EXPECT_EQ(run["stages"][1]["message"], "not run: the build stage failed");
}

TEST_F(AgentE2eTest, SigtermEndsTheStageAndGivesTheJobBack) {
  start_server();
  repo_.write("kwbench-fake.json", R"({"sleep_stage": "quick_bench", "sleep_seconds": 60})");
  fs::path marker = work_dir_ / "sleep";
  std::ofstream(marker) << "x";
  setenv("KW_FAKE_SLEEP_FILE", marker.c_str(), 1);
  std::int64_t job = submit(repo_.commit("slow quick bench"));
  ChildProcess& agent = start_agent("host-a", false);
  unsetenv("KW_FAKE_SLEEP_FILE");
  agent.wait_for("stage quick_bench started");
  auto signalled = std::chrono::steady_clock::now();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait_exit(), 0) << agent.output();
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(20));
  EXPECT_NE(agent.output().find("given back"), std::string::npos) << agent.output();
  json job_state = server_->client().get("/api/v1/jobs/" + std::to_string(job)).json();
  EXPECT_EQ(job_state["state"], "queued");
  EXPECT_EQ(job_state["attempts"], 0);
}

TEST_F(AgentE2eTest, RunOutWorksWithoutAGpuAndUploadPostsIt) {
  start_server();
  repo_.commit("for kw run");
  fs::path out = work_dir_ / "report.json";
  auto run = run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--out", out.string()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(out);
  json report = json::parse(in);
  EXPECT_EQ(report["stages"][0]["status"], "passed");
  for (std::size_t i = 1; i < 6; ++i) {
    EXPECT_EQ(report["stages"][i]["status"], "skipped");
    EXPECT_EQ(report["stages"][i]["message"], "no CUDA device");
  }
  auto upload =
      run_command({KW_BINARY, "upload", out.string(), "--server", server_->url(), "--token", agent_token_});
  // Stored, but with nothing measured there is nothing to judge: no verdict.
  EXPECT_EQ(upload.exit_code, 3) << upload.output;
  EXPECT_NE(upload.output.find("verdict no-data"), std::string::npos) << upload.output;
  auto again =
      run_command({KW_BINARY, "upload", out.string(), "--server", server_->url(), "--token", agent_token_});
  EXPECT_NE(again.output.find("(already stored)"), std::string::npos) << again.output;
}

// A commit renames the bench's output and kernelwatch.json still names the
// old path: in a working checkout the previous build's executable is still
// there, and must fail load, named with its age, instead of being timed. A
// build that has nothing to do for a bench leaves it as it was, and that is
// no reason to refuse it.
TEST_F(AgentE2eTest, RunInACheckoutRefusesABenchThisBuildDidNotWrite) {
  auto config_with = [](const std::string& bench) {
    return json{{"project", "demo"},
                {"build", {{"commands", {"sh build.sh"}}, {"timeout_s", 60}}},
                {"benches", {{{"name", "fake"}, {"path", bench}, {"format", "kwbench"}}}}}
        .dump(2);
  };
  // Incremental, as make is: the bench is copied only when missing.
  auto build_writing = [](const std::string& bench) {
    return "mkdir -p out && { [ -e " + bench + " ] || cp " + std::string(KW_FAKE_BENCH) + " " + bench +
           "; }\n";
  };
  auto run = [&](const std::string& name) {
    return run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--gpu-test-double",
                        "kwbench CPU test double", "--out", (work_dir_ / name).string()});
  };
  repo_.write(".gitignore", "out/\n");
  repo_.write("kernelwatch.json", config_with("out/bench-v1"));
  repo_.write("build.sh", build_writing("out/bench-v1"));
  repo_.commit("bench in out/bench-v1");
  auto first = run("first.json");
  ASSERT_EQ(first.exit_code, 0) << first.output;

  // The previous build's output, an hour old by now.
  fs::last_write_time(repo_.dir() / "out/bench-v1", fs::file_time_type::clock::now() - std::chrono::hours(1));
  repo_.write("build.sh", build_writing("out/bench-v2"));
  repo_.commit("the bench is out/bench-v2 now");
  auto second = run("second.json");
  EXPECT_EQ(second.exit_code, 2) << second.output;
  const json report = json::parse(std::ifstream(work_dir_ / "second.json"));
  const json& load = report["stages"][1];
  EXPECT_EQ(load["name"], "load");
  EXPECT_EQ(load["status"], "failed");
  const std::string message = load["message"];
  EXPECT_NE(message.find("`out/bench-v1`: not written by this build: last written 60 min ago"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("before build.sh changed"), std::string::npos) << message;

  repo_.write("kernelwatch.json", config_with("out/bench-v2"));
  repo_.commit("track out/bench-v2");
  auto third = run("third.json");
  EXPECT_EQ(third.exit_code, 0) << third.output;
  repo_.write("README.md", "docs only\n");
  repo_.commit("docs only");
  auto docs = run("docs.json");
  EXPECT_EQ(docs.exit_code, 0) << docs.output;
}

// kw upload exits as kw gate does: 1 a regression, 2 a failed stage, 3 no
// verdict (a file it cannot read, a token that may not post), never 0 for a
// regression and never 1 for anything but one.
TEST_F(AgentE2eTest, UploadExitsWithTheVerdictLikeTheGate) {
  start_server();
  auto upload = [&](const json& report, const std::string& token) {
    const fs::path file = work_dir_ / ("report-" + std::to_string(std::rand()) + ".json");
    std::ofstream(file) << report.dump();
    return run_command({KW_BINARY, "upload", file.string(), "--server", server_->url(), "--token", token});
  };
  ReportSpec slower;
  slower.commit = make_commit(81);
  slower.base_commit = make_commit(80);
  slower.branch = "feature";
  slower.replicates = 4;
  slower.samples = 20;
  slower.ab = true;
  slower.slowdown = 1.3;
  auto regression = upload(make_report(slower), agent_token_);
  EXPECT_EQ(regression.exit_code, 1) << regression.output;
  EXPECT_NE(regression.output.find("REGRESSION"), std::string::npos) << regression.output;
  EXPECT_NE(regression.output.find("/#/run/"), std::string::npos) << "the dashboard page, not the API";

  ReportSpec failed;
  failed.commit = make_commit(82);
  failed.failed_stage = "load";
  auto preflight = upload(make_report(failed), agent_token_);
  EXPECT_EQ(preflight.exit_code, 2) << preflight.output;

  ReportSpec plain;
  plain.commit = make_commit(83);
  auto refused = upload(make_report(plain), ci_token_);
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("posted with an agent token: kw-server token create --scope agent"),
            std::string::npos)
      << refused.output;
  auto unreadable = run_command({KW_BINARY, "upload", (work_dir_ / "no-such.json").string(), "--server",
                                 server_->url(), "--token", agent_token_});
  EXPECT_EQ(unreadable.exit_code, 3) << unreadable.output;
}

// A report larger than a part goes in parts. A part the network loses stays
// missing on the server and nothing of the run is stored; sending the spooled
// report again sends only the parts the server lacks, and stores the run once.
TEST_F(AgentE2eTest, UploadSendsALargeReportInPartsAndResendsOnlyWhatWasLost) {
  start_server();
  ReportSpec spec;
  spec.commit = make_commit(77);
  spec.cases = 300;
  spec.replicates = 3;
  spec.samples = 20;
  const json report = make_report(spec);
  fs::path spooled = work_dir_ / "run-spooled.json";
  std::ofstream(spooled) << json{{"target", "/api/v1/runs"}, {"report", report}}.dump();
  LossyNetwork network(server_->url());
  network.lose("/parts/1?");
  setenv("KW_UPLOAD_PART_BYTES", "65536", 1);
  auto lost = run_command(
      {KW_BINARY, "upload", spooled.string(), "--server", network.url(), "--token", agent_token_});
  EXPECT_NE(lost.exit_code, 0) << lost.output;
  std::smatch parts;
  ASSERT_TRUE(std::regex_search(lost.output, parts, std::regex("report in ([0-9]+) parts"))) << lost.output;
  EXPECT_GE(std::stoi(parts[1]), 3) << lost.output;
  EXPECT_TRUE(server_->client().get("/api/v1/projects/demo/runs").json().empty());

  // The server holds a part 0 that is not this report's (another report
  // under the same name, a part changed on the way): kw sends its own again.
  std::string upload_path;
  for (const std::string& line : network.requests()) {
    std::smatch path;
    if (std::regex_search(line, path, std::regex("PUT (/api/v1/projects/demo/uploads/[^/]+)/parts/0")))
      upload_path = path[1];
  }
  ASSERT_FALSE(upload_path.empty());
  json other_part = report;
  other_part["cases"] = json::array({report["cases"][0]});
  other_part["cases"][0]["name"] = "not this report's";
  ASSERT_EQ(server_->client(agent_token_)
                .request("PUT", upload_path + "/parts/0?of=" + parts[1].str(), other_part.dump())
                .status,
            200);

  network.lose("");
  auto resent = run_command(
      {KW_BINARY, "upload", spooled.string(), "--server", network.url(), "--token", agent_token_});
  EXPECT_EQ(resent.exit_code, 0) << resent.output;
  EXPECT_NE(resent.output.find("report in " + parts[1].str() + " parts"), std::string::npos) << resent.output;
  EXPECT_EQ(resent.output.find("already on the server"), std::string::npos) << resent.output;
  json runs = server_->client().get("/api/v1/projects/demo/runs").json();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["cases"], 300);
  int first_part_sent = 0, second_part_sent = 0;
  for (const std::string& line : network.requests()) {
    first_part_sent += line.find("PUT ") == 0 && line.find("/parts/0?") != std::string::npos;
    second_part_sent += line.find("PUT ") == 0 && line.find("/parts/2?") != std::string::npos;
  }
  EXPECT_EQ(first_part_sent, 2) << "the part the server held under its number was another's: sent again";
  EXPECT_EQ(second_part_sent, 1);
  const json stored = server_->client().get("/api/v1/runs/" + runs[0]["id"].dump() + "?per_page=1").json();
  EXPECT_EQ(stored["cases"][0]["name"], report["cases"][0]["name"]);
  // Sent once more (its answer lost, say): the stored run, nothing sent.
  auto again = run_command(
      {KW_BINARY, "upload", spooled.string(), "--server", network.url(), "--token", agent_token_});
  unsetenv("KW_UPLOAD_PART_BYTES");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(already stored)"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("report in"), std::string::npos) << again.output;
  EXPECT_EQ(server_->client().get("/api/v1/projects/demo/runs").json().size(), 1u);
}

// kw run measures the checkout in place: uncommitted changes would be
// measured under the commit's name, so they are refused, and measured only
// into a file when asked for.
TEST_F(AgentE2eTest, RunRefusesUncommittedChangesUnlessMeasuredIntoAFile) {
  repo_.commit("clean");
  repo_.write("build.sh", "echo building something else\n");
  auto refused = run_command(
      {KW_BINARY, "run", "--repo", repo_.dir().string(), "--out", (work_dir_ / "refused.json").string()});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("uncommitted changes to tracked files (build.sh)"), std::string::npos)
      << refused.output;
  EXPECT_FALSE(fs::exists(work_dir_ / "refused.json"));
  // --allow-dirty never posts: without --out it is refused too.
  auto posted = run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--allow-dirty", "--server",
                             "http://127.0.0.1:9", "--token", "unused"});
  EXPECT_NE(posted.exit_code, 0);
  EXPECT_NE(posted.output.find("--allow-dirty --out FILE"), std::string::npos) << posted.output;
  fs::path out = work_dir_ / "dirty.json";
  auto allowed =
      run_command({KW_BINARY, "run", "--repo", repo_.dir().string(), "--allow-dirty", "--out", out.string()});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("measuring uncommitted changes (build.sh)"), std::string::npos)
      << allowed.output;
  EXPECT_TRUE(fs::exists(out));
}

}  // namespace
