// kw-server as a process: embedded PostgreSQL lifecycle, kill -9 during
// ingest, restart, tokens created while it runs, graceful SIGTERM.
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <pqxx/pqxx>

#include "../../tests/support/child_process.hpp"
#include "../../tests/support/report_factory.hpp"
#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "kw/http/client.hpp"

namespace {

namespace fs = std::filesystem;
using kw::testing::ChildProcess;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

// Running, as opposed to gone or a zombie waiting for a parent that does not
// reap (PID 1 in some containers).
bool process_alive(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, command, state;
  stat >> pid_field >> command >> state;
  return stat && state != "Z";
}

ReportSpec seeded(std::uint64_t seed) {
  ReportSpec spec;
  spec.seed = seed;
  return spec;
}

class ServerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { data_dir_ = kw::testing::make_cluster_dir("kw-server-test"); }
  void TearDown() override {
    server_.reset();
    // Stop any postmaster a killed server left behind.
    kw::testing::run_command({KW_SERVER_BINARY, "token", "list", "--data-dir", data_dir_.string()});
    std::error_code ec;
    fs::remove_all(data_dir_, ec);
  }

  std::string start_server() {
    server_ = std::make_unique<ChildProcess>(std::vector<std::string>{
        KW_SERVER_BINARY, "--data-dir", data_dir_.string(), "--listen", "127.0.0.1:0"});
    std::string port = server_->wait_for("listening on http://127\\.0\\.0\\.1:(\\d+)");
    return "http://127.0.0.1:" + port;
  }

  // Scoped to "demo", which it creates: the project every report here names.
  std::string create_token(const std::string& scope) {
    auto result =
        kw::testing::run_command({KW_SERVER_BINARY, "token", "create", "--data-dir", data_dir_.string(),
                                  "--scope", scope, "--name", "t-" + scope, "--project", "demo"});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::string text = result.output;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    return text.substr(text.rfind('\n') + 1);
  }

  long postmaster_pid() {
    std::ifstream in(data_dir_ / "postgres" / "postmaster.pid");
    long pid = 0;
    in >> pid;
    return pid;
  }

  // Every run the server lists must be complete: all its cases, all samples.
  void expect_only_complete_runs(const std::string& url, const std::set<std::int64_t>& acknowledged,
                                 int cases, int samples) {
    kw::http::Client client(url);
    json runs = client.get("/api/v1/projects/demo/runs?limit=1000").json();
    std::set<std::int64_t> stored;
    for (const json& run : runs) {
      std::int64_t id = run["id"];
      stored.insert(id);
      json full = client.get("/api/v1/runs/" + std::to_string(id)).json();
      ASSERT_EQ(full["stages"].size(), 6u) << "run " << id;
      ASSERT_EQ(full["cases"].size(), static_cast<std::size_t>(cases)) << "run " << id << " is partial";
      for (const json& c : full["cases"]) {
        ASSERT_EQ(c["measurements"].size(), 2u);
        ASSERT_EQ(c["measurements"][0]["samples_ns"].size(), static_cast<std::size_t>(samples));
      }
    }
    for (std::int64_t id : acknowledged)
      EXPECT_TRUE(stored.contains(id)) << "acknowledged run " << id << " was lost";
  }

  fs::path data_dir_;
  std::unique_ptr<ChildProcess> server_;
};

TEST_F(ServerProcessTest, FirstStartCreatesClusterAndTokenWorksWhileRunning) {
  std::string url = start_server();
  EXPECT_TRUE(fs::exists(data_dir_ / "postgres" / "PG_VERSION"));
  std::string token = create_token("agent");
  ASSERT_EQ(token.rfind("kw_", 0), 0u) << token;
  kw::http::Client client(url, token);
  auto response = client.post("/api/v1/runs", make_report({}));
  EXPECT_EQ(response.status, 201) << response.body;
  auto listed =
      kw::testing::run_command({KW_SERVER_BINARY, "token", "list", "--data-dir", data_dir_.string()});
  EXPECT_NE(listed.output.find("agent\tt-agent"), std::string::npos) << listed.output;
  auto revoked = kw::testing::run_command(
      {KW_SERVER_BINARY, "token", "revoke", "--data-dir", data_dir_.string(), "t-agent"});
  EXPECT_EQ(revoked.exit_code, 0) << revoked.output;
  EXPECT_EQ(client.post("/api/v1/runs", make_report(seeded(9))).status, 401);
}

TEST_F(ServerProcessTest, SigtermStopsServerAndPostgresCleanly) {
  std::string url = start_server();
  long postmaster = postmaster_pid();
  ASSERT_GT(postmaster, 0);
  server_->signal(SIGTERM);
  EXPECT_EQ(server_->wait_exit(), 0) << server_->output();
  EXPECT_NE(server_->output().find("SIGTERM: finishing requests in flight"), std::string::npos);
  EXPECT_FALSE(fs::exists(data_dir_ / "postgres" / "postmaster.pid")) << "postmaster still running";
  // The postmaster removes its pid file just before it exits: give the
  // exit itself a moment on a loaded machine.
  for (int i = 0; i < 50 && process_alive(postmaster); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(process_alive(postmaster))
      << "postmaster " << postmaster << " still running 5 s after kw-server";
}

TEST_F(ServerProcessTest, KillDuringIngestLosesNothingCommittedAndLeavesNoPartialRun) {
  std::string url = start_server();
  std::string token = create_token("agent");
  constexpr int kCases = 200, kSamples = 100;
  std::mutex mutex;
  std::set<std::int64_t> acknowledged;
  std::atomic<bool> stop{false};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&, t] {
      kw::http::Client client(url, token);
      for (int i = 0; !stop; ++i) {
        ReportSpec spec;
        spec.cases = kCases;
        spec.samples = kSamples;
        spec.seed = static_cast<std::uint64_t>(t) * 100000 + static_cast<std::uint64_t>(i) + 1;
        try {
          auto response = client.post("/api/v1/runs", make_report(spec));
          if (response.status == 201) {
            std::lock_guard lock(mutex);
            acknowledged.insert(response.json()["run_id"].get<std::int64_t>());
          }
        } catch (const kw::http::ConnectionError&) {
          return;  // the server is gone
        }
      }
    });
  }
  // Let several ingests commit, then kill mid-stream.
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard lock(mutex);
    if (acknowledged.size() >= 6) break;
  }
  const long postmaster = postmaster_pid();
  server_->signal(SIGKILL);
  server_->wait_exit();
  stop = true;
  for (auto& poster : posters) poster.join();
  ASSERT_GE(acknowledged.size(), 1u);

  // The postmaster got SIGINT as kw-server died, and shut down by itself.
  for (int i = 0; i < 100 && process_alive(postmaster); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(process_alive(postmaster)) << "postmaster " << postmaster << " outlived kw-server by 10 s";
  std::string restarted = start_server();
  expect_only_complete_runs(restarted, acknowledged, kCases, kSamples);
}

// Ten kill -9 cycles while four agents post: even cycles kill kw-server
// (its postmaster shuts down as it dies), odd ones kw-server and the
// postmaster together, as an OOM kill of the machine's biggest processes
// would. After every restart each report acknowledged so far is stored,
// complete, and no run is partial.
TEST_F(ServerProcessTest, TenKillCyclesWhileAgentsPostLoseNoAcknowledgedReport) {
  constexpr int kCases = 20, kSamples = 30;
  std::set<std::int64_t> acknowledged;
  std::mutex mutex;
  std::uint64_t seed = 1;
  for (int cycle = 0; cycle < 10; ++cycle) {
    std::string url = start_server();
    if (cycle > 0) {
      expect_only_complete_runs(url, acknowledged, kCases, kSamples);
      if (HasFailure()) return;
    }
    std::string token = create_token("agent");
    std::atomic<bool> stop{false};
    std::atomic<int> this_cycle{0};
    std::vector<std::thread> posters;
    for (int t = 0; t < 4; ++t) {
      std::uint64_t first;
      {
        std::lock_guard lock(mutex);
        first = seed;
        seed += 100000;
      }
      posters.emplace_back([&, first] {
        kw::http::Client client(url, token);
        for (std::uint64_t i = first; !stop; ++i) {
          ReportSpec spec;
          spec.cases = kCases;
          spec.samples = kSamples;
          spec.seed = i;
          try {
            auto response = client.post("/api/v1/runs", make_report(spec));
            if (response.status == 201) {
              std::lock_guard lock(mutex);
              acknowledged.insert(response.json()["run_id"].get<std::int64_t>());
              ++this_cycle;
            }
          } catch (const kw::http::ConnectionError&) {
            return;  // the server is gone
          }
        }
      });
    }
    for (int i = 0; i < 200 && this_cycle < 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    const long postmaster = postmaster_pid();
    if (cycle % 2 == 1) {
      server_->signal(SIGSTOP);  // so that its supervisor does not start PostgreSQL again
      kill(static_cast<pid_t>(postmaster), SIGKILL);
    }
    server_->signal(SIGKILL);
    server_->wait_exit();
    stop = true;
    for (auto& poster : posters) poster.join();
    ASSERT_GE(this_cycle.load(), 1) << "cycle " << cycle << ": nothing was acknowledged\n"
                                    << server_->output();
    for (int i = 0; i < 100 && process_alive(postmaster); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_FALSE(process_alive(postmaster)) << "cycle " << cycle << ": the postmaster outlived kw-server";
  }
  expect_only_complete_runs(start_server(), acknowledged, kCases, kSamples);
  std::cout << acknowledged.size() << " reports acknowledged over 10 kill -9 cycles, all stored\n";
}

TEST_F(ServerProcessTest, RestartAfterPostgresWasKilledToo) {
  std::string url = start_server();
  std::string token = create_token("agent");
  std::set<std::int64_t> acknowledged;
  kw::http::Client client(url, token);
  for (int i = 0; i < 3; ++i) {
    auto response = client.post("/api/v1/runs", make_report(seeded(static_cast<std::uint64_t>(i) + 1)));
    ASSERT_EQ(response.status, 201);
    acknowledged.insert(response.json()["run_id"].get<std::int64_t>());
  }
  long postmaster = postmaster_pid();
  // Both gone at once, as in a machine's OOM kill: the server stopped first
  // so that its supervisor does not start the postmaster again.
  server_->signal(SIGSTOP);
  ASSERT_EQ(kill(static_cast<pid_t>(postmaster), SIGKILL), 0);
  // Wait for the postmaster (and its children) to be gone, leaving a stale lock file.
  for (int i = 0; i < 100 && process_alive(postmaster); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  server_->signal(SIGKILL);
  server_->wait_exit();
  ASSERT_TRUE(fs::exists(data_dir_ / "postgres" / "postmaster.pid"));

  std::string restarted = start_server();
  expect_only_complete_runs(restarted, acknowledged, 3, 30);
}

// Out of file descriptors, accept fails at once for as long as a connection
// waits: the server pauses and retries instead of spinning, logs at most once
// a second, and serves again once connections end.
TEST_F(ServerProcessTest, OutOfDescriptorsBacksOffAndServesAgain) {
  server_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"/usr/bin/prlimit", "--nofile=256", KW_SERVER_BINARY, "--data-dir",
                               data_dir_.string(), "--listen", "127.0.0.1:0"});
  const auto port =
      static_cast<unsigned short>(std::stoi(server_->wait_for("listening on http://127\\.0\\.0\\.1:(\\d+)")));
  boost::asio::io_context io;
  std::vector<boost::asio::ip::tcp::socket> held;
  for (int i = 0; i < 400; ++i) {
    held.emplace_back(io);
    held.back().connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  server_->wait_for("kw-server: accept: ");
  // A deliberate wait, not one for a condition: the log must stay quiet for
  // these 3 s while the descriptors stay exhausted.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string output = server_->output();
  std::size_t logged = 0;
  for (std::size_t at = output.find("kw-server: accept: "); at != std::string::npos;
       at = output.find("kw-server: accept: ", at + 1))
    ++logged;
  EXPECT_GE(logged, 1u);
  EXPECT_LE(logged, 5u) << output.substr(output.size() > 2000 ? output.size() - 2000 : 0);
  held.clear();
  // The connections it had taken end with their sockets; then it serves again.
  int status = 0;
  for (int attempt = 0; attempt < 100 && status != 200; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      status = kw::http::Client("http://127.0.0.1:" + std::to_string(port)).get("/healthz").status;
    } catch (const std::exception&) {
    }
  }
  EXPECT_EQ(status, 200);
}

// The postmaster and its backends, by parent.
std::vector<pid_t> postgres_processes(pid_t postmaster) {
  std::vector<pid_t> pids{postmaster};
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // "pid (comm) state ppid ...": comm may hold spaces, so from the last ')'.
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == postmaster) pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// Each kind of request, timed: a read, an ingest, /healthz.
struct Probe {
  std::string what;
  int status = 0;
  bool retry_after = false;
  double seconds = 0;
};

std::vector<Probe> probe_all(const std::string& url, const std::string& token) {
  std::vector<Probe> probes;
  auto timed = [&](const std::string& what, auto&& call) {
    kw::http::Client client(url, token, std::chrono::seconds(30));
    const auto started = std::chrono::steady_clock::now();
    kw::http::Response response = call(client);
    probes.push_back({what, response.status, response.headers.contains("retry-after"),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()});
  };
  timed("GET /api/v1/projects", [](kw::http::Client& c) { return c.get("/api/v1/projects"); });
  timed("POST /api/v1/runs",
        [](kw::http::Client& c) { return c.post("/api/v1/runs", make_report(seeded(77))); });
  timed("GET /healthz", [](kw::http::Client& c) { return c.get("/healthz"); });
  timed("GET /api/v1/projects/demo/runs",
        [](kw::http::Client& c) { return c.get("/api/v1/projects/demo/runs"); });
  return probes;
}

bool healthy_within(const std::string& url, std::chrono::seconds limit) {
  kw::http::Client client(url);
  for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
    try {
      if (client.get("/healthz").status == 200) return true;
    } catch (const kw::http::ConnectionError&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// A frozen PostgreSQL (every process stopped: a stalled disk, a VM paused):
// each request answers 503 with Retry-After within 2 s, and kw-server serves
// again by itself once the database thaws.
TEST_F(ServerProcessTest, AFrozenDatabaseGets503WithinTwoSecondsAndTheServerRecoversByItself) {
  std::string url = start_server();
  std::string token = create_token("agent");
  kw::http::Client client(url, token);
  ASSERT_EQ(client.post("/api/v1/runs", make_report(seeded(1))).status, 201);
  const std::vector<pid_t> frozen = postgres_processes(static_cast<pid_t>(postmaster_pid()));
  ASSERT_GE(frozen.size(), 2u);
  for (pid_t pid : frozen) ASSERT_EQ(kill(pid, SIGSTOP), 0);
  std::vector<Probe> probes = probe_all(url, token);
  // /metrics needs no database: it answers, and says the database is down.
  const auto scrape_started = std::chrono::steady_clock::now();
  kw::http::Response metrics = kw::http::Client(url).get("/metrics");
  const double scrape_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - scrape_started).count();
  for (pid_t pid : frozen) kill(pid, SIGCONT);
  EXPECT_EQ(metrics.status, 200) << metrics.body.substr(0, 300);
  EXPECT_NE(metrics.body.find("kw_db_up 0"), std::string::npos) << metrics.body.substr(0, 300);
  EXPECT_LT(scrape_seconds, 1.0);
  for (const Probe& probe : probes) {
    EXPECT_EQ(probe.status, 503) << probe.what;
    EXPECT_TRUE(probe.retry_after) << probe.what;
    EXPECT_LT(probe.seconds, 2.0) << probe.what;
    std::cout << "frozen: " << probe.what << " -> " << probe.status << " in " << probe.seconds << " s\n";
  }
  ASSERT_TRUE(healthy_within(url, std::chrono::seconds(10))) << server_->output();
  EXPECT_EQ(client.post("/api/v1/runs", make_report(seeded(2))).status, 201);
  EXPECT_EQ(client.get("/api/v1/projects/demo/runs").json().size(), 2u);
}

// The postmaster killed: requests meanwhile get 503 within 2 s, and
// kw-server's supervisor starts it again on its port, where the pool's
// broken connections are replaced.
TEST_F(ServerProcessTest, AKilledPostmasterIsStartedAgainAndRequestsMeanwhileGet503) {
  std::string url = start_server();
  std::string token = create_token("agent");
  kw::http::Client client(url, token);
  ASSERT_EQ(client.post("/api/v1/runs", make_report(seeded(1))).status, 201);
  const long postmaster = postmaster_pid();
  ASSERT_EQ(kill(static_cast<pid_t>(postmaster), SIGKILL), 0);
  for (int i = 0; i < 100 && process_alive(postmaster); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<Probe> probes = probe_all(url, token);
  for (const Probe& probe : probes) {
    std::cout << "killed: " << probe.what << " -> " << probe.status << " in " << probe.seconds << " s\n";
    EXPECT_LT(probe.seconds, 2.0) << probe.what;
    // /healthz answers from the monitor's last ping (every 250 ms), with no
    // token check and no query: right after the kill it may not know yet.
    if (probe.what == "GET /healthz") continue;
    // A backend outlives its postmaster until it next waits: the first read,
    // in the first milliseconds, may still be served, and that is an answer.
    if (&probe == &probes.front() && probe.status == 200 && probe.what.starts_with("GET ")) continue;
    EXPECT_EQ(probe.status, 503) << probe.what;
    EXPECT_TRUE(probe.retry_after) << probe.what;
  }
  int health = 200;
  for (int i = 0; i < 20 && health == 200; ++i) {
    health = kw::http::Client(url).get("/healthz").status;
    if (health == 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(health, 503) << "the monitor's ping notices the database is gone";
  // Backends the kill orphaned may answer a ping for a moment: wait for the new postmaster.
  bool restarted = false;
  for (int i = 0; i < 150 && !restarted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    restarted = postmaster_pid() > 0 && postmaster_pid() != postmaster;
  }
  ASSERT_TRUE(restarted) << server_->output();
  ASSERT_TRUE(healthy_within(url, std::chrono::seconds(15))) << server_->output();
  EXPECT_NE(server_->output().find("starting it again in 1 s"), std::string::npos) << server_->output();
  EXPECT_EQ(client.post("/api/v1/runs", make_report(seeded(2))).status, 201);
  EXPECT_EQ(client.get("/api/v1/projects/demo/runs").json().size(), 2u);
}

TEST_F(ServerProcessTest, RefusesADatabaseNewerThanItKnows) {
  std::string url = start_server();
  // Pretend a newer kw-server migrated this database.
  auto password = [&] {
    std::ifstream in(data_dir_ / "postgres.password");
    std::string text;
    std::getline(in, text);
    return text;
  }();
  std::ifstream pid_file(data_dir_ / "postgres" / "postmaster.pid");
  std::string line, port;
  for (int i = 0; i < 4 && std::getline(pid_file, line); ++i) port = line;
  {
    pqxx::connection connection("postgresql://kw:" + password + "@127.0.0.1:" + port + "/kernelwatch");
    pqxx::work tx(connection);
    tx.exec("INSERT INTO schema_migrations (version, name) VALUES (999, '999_future')");
    tx.commit();
  }
  server_->signal(SIGTERM);
  server_->wait_exit();
  ChildProcess second({KW_SERVER_BINARY, "--data-dir", data_dir_.string(), "--listen", "127.0.0.1:0"});
  EXPECT_EQ(second.wait_exit(), 1);
  EXPECT_NE(second.output().find("the database schema is at version 999, newer than this kw-server knows"),
            std::string::npos)
      << second.output();
}

// kill -9 of kw-server, or of its PostgreSQL, while a report sent in parts
// is being completed: the completion's claim lapses in seconds, and resending
// the completion (as kw upload and the spool do, retrying 409
// upload_completing) stores exactly one run. KW_COMPLETION_KILL_ROUNDS sets
// the rounds (tools/completion-kills.sh runs 10 for docs/PERFORMANCE.md).
TEST_F(ServerProcessTest, AKillDuringAnUploadsCompletionLosesNoReport) {
  int rounds = 2;
  if (const char* env = std::getenv("KW_COMPLETION_KILL_ROUNDS")) rounds = std::stoi(env);
  constexpr int kCases = 3000, kParts = 6;
  int stored_runs = 0;
  for (int round = 0; round < rounds; ++round) {
    std::string url = start_server();
    const std::string token = create_token("agent");
    ReportSpec spec;
    spec.cases = kCases;
    spec.samples = 10;
    spec.seed = 1000 + static_cast<std::uint64_t>(round);
    json report = make_report(spec);
    const std::string upload = "/api/v1/projects/demo/uploads/kill-round-" + std::to_string(round);
    {
      kw::http::Client client(url, token);
      json cases = std::move(report["cases"]);
      for (int k = 0; k < kParts; ++k) {
        json part = k == 0 ? report : json::object();
        part["cases"] = json::array();
        for (int i = k * kCases / kParts; i < (k + 1) * kCases / kParts; ++i)
          part["cases"].push_back(cases[i]);
        auto put = client.request(
            "PUT", upload + "/parts/" + std::to_string(k) + "?of=" + std::to_string(kParts), part.dump());
        ASSERT_EQ(put.status, 200) << put.body;
      }
    }
    // The completion, killed at a moment that moves each round: before,
    // during and after its claim, its ingest and its commit.
    std::thread completion([&] {
      try {
        kw::http::Client(url, token).request("POST", upload, "{}");
      } catch (const kw::http::ConnectionError&) {
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 150 * (round % 6)));
    const long postmaster = postmaster_pid();
    const bool database_too = round % 2 == 1;
    if (database_too) {
      server_->signal(SIGSTOP);  // so that its supervisor does not start PostgreSQL again
      kill(static_cast<pid_t>(postmaster), SIGKILL);
    }
    server_->signal(SIGKILL);
    server_->wait_exit();
    completion.join();
    for (int i = 0; i < 100 && process_alive(postmaster); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));

    url = start_server();
    kw::http::Client client(url, token);
    kw::http::Response answer;
    int conflicts = 0;
    // The claim lapses 20 s after it was taken (kCompletionClaimSeconds).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(45);
    for (;;) {
      answer = client.request("POST", upload, "{}");
      if (answer.status != 409 || std::chrono::steady_clock::now() > deadline) break;
      EXPECT_NE(answer.body.find("upload_completing"), std::string::npos) << answer.body;
      ++conflicts;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    ASSERT_TRUE(answer.status == 200 || answer.status == 201)
        << "round " << round << (database_too ? " (PostgreSQL killed too)" : "") << ": " << answer.status
        << " " << answer.body;
    json runs = client.get("/api/v1/projects/demo/runs?limit=1000").json();
    int of_this_commit = 0;
    for (const json& run : runs) of_this_commit += run["commit"] == report["commit"];
    EXPECT_EQ(of_this_commit, 1) << "round " << round << ": " << runs.dump();
    stored_runs += of_this_commit;
    std::cout << "round " << round
              << (database_too ? " (kw-server and PostgreSQL killed)" : " (kw-server killed)")
              << ": stored after " << conflicts << " resends answered 409 upload_completing\n";
    server_->signal(SIGTERM);
    server_->wait_exit();
  }
  std::cout << stored_runs << " of " << rounds << " reports stored once after kill -9 mid-completion\n";
}

}  // namespace
