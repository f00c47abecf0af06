// kw-server-bench: ingest latency (200 cases x 100 samples), series query over
// 10,000 runs of one case, claim throughput with 50 concurrent agents, reads
// while agents post, and a 10,000-case run read back by pages,
// against a real kw-server (in-process, all HTTP over loopback) on a private
// embedded PostgreSQL. Prints a markdown table; --json writes the numbers.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <CLI/CLI.hpp>

#include "../../tests/support/report_factory.hpp"
#include "app.hpp"
#include "kw/common/stats.hpp"
#include "kw/http/client.hpp"
#include "store/embedded_postgres.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"

namespace {

using namespace kw::server;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Result {
  std::string name;
  std::size_t requests = 0;
  double p50_ms = 0, p99_ms = 0, per_second = 0;
  std::string note;
};

Result summarize(std::string name, std::vector<double> latencies_ms, double wall_ms, std::string note = {}) {
  Result result{std::move(name),
                latencies_ms.size(),
                kw::common::quantile(latencies_ms, 0.5),
                kw::common::quantile(latencies_ms, 0.99),
                latencies_ms.size() / (wall_ms / 1000),
                std::move(note)};
  std::cerr << "  " << result.name << ": p50 " << result.p50_ms << " ms, p99 " << result.p99_ms << " ms, "
            << result.per_second << " req/s\n";
  return result;
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kw-server-bench"};
  int ingest_runs = 60, series_runs = 10000, series_queries = 500, claim_jobs = 5000, agents = 50,
      threads = 4, load_posters = 8, load_queries = 500, load_cases = 3, large_cases = 10000,
      read_threads = HttpOptions{}.read_threads, write_threads = HttpOptions{}.write_threads;
  std::string json_out;
  cli.add_option("--ingest-runs", ingest_runs)->capture_default_str();
  cli.add_option("--series-runs", series_runs)->capture_default_str();
  cli.add_option("--series-queries", series_queries)->capture_default_str();
  cli.add_option("--claim-jobs", claim_jobs)->capture_default_str();
  cli.add_option("--agents", agents)->capture_default_str();
  cli.add_option("--threads", threads, "kw-server HTTP threads")->capture_default_str();
  cli.add_option("--load-posters", load_posters, "agents posting while reads are timed")
      ->capture_default_str();
  cli.add_option("--read-threads", read_threads, "kw-server threads running GET")->capture_default_str();
  cli.add_option("--write-threads", write_threads, "kw-server threads running the rest")
      ->capture_default_str();
  cli.add_option("--load-cases", load_cases, "cases in each report posted meanwhile")->capture_default_str();
  cli.add_option("--load-queries", load_queries, "reads timed, idle and under load")->capture_default_str();
  cli.add_option("--large-cases", large_cases, "cases of the run read back by pages")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--json", json_out, "write results as JSON");
  CLI11_PARSE(cli, argc, argv);

  char pattern[] = "/tmp/kw-server-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  std::filesystem::path dir = pattern;
  std::vector<Result> results;
  try {
    EmbeddedPostgres postgres(dir);
    postgres.start();
    ServerOptions options;
    options.http.port = 0;
    options.http.threads = threads;
    options.http.read_threads = read_threads;
    options.http.write_threads = write_threads;
    options.database_url = postgres.url();
    App app(options);
    app.start();
    std::string url = "http://127.0.0.1:" + std::to_string(app.port());
    std::string agent_token, ci_token;
    {
      pqxx::connection connection(postgres.url());
      pqxx::work tx(connection);
      agent_token = TokenRepository::create(tx, "bench-agent", Scope::agent);
      ci_token = TokenRepository::create(tx, "bench-ci", Scope::ci);
      for (const char* project : {"ingest", "series", "claims", "load", "large"})
        RunRepository::create_project(tx, project, "main");
      tx.commit();
    }

    // 1. Ingest: one agent posting 200-case x 100-sample reports back to back.
    std::cerr << "ingest: " << ingest_runs << " runs of 200 cases x 100 samples\n";
    {
      kw::http::Client client(url, agent_token);
      std::vector<std::string> bodies;
      for (int i = 0; i < ingest_runs + 3; ++i) {
        kw::testing::ReportSpec spec;
        spec.project = "ingest";
        spec.cases = 200;
        spec.samples = 100;
        spec.seed = static_cast<std::uint64_t>(i + 1);
        bodies.push_back(kw::testing::make_report(spec).dump());
      }
      for (int i = 0; i < 3; ++i)
        check(client.request("POST", "/api/v1/runs", bodies[i]).status == 201, "warm-up ingest");
      std::vector<double> latencies;
      auto start = Clock::now();
      for (int i = 3; i < ingest_runs + 3; ++i) {
        auto t0 = Clock::now();
        auto response = client.request("POST", "/api/v1/runs", bodies[i]);
        latencies.push_back(ms_since(t0));
        check(response.status == 201,
              "ingest answered " + std::to_string(response.status) + ": " + response.body);
      }
      results.push_back(
          summarize("ingest 200 cases x 100 samples (" + std::to_string(bodies[3].size() / 1024) + " KiB)",
                    latencies, ms_since(start)));
    }

    // 2. Series over `series_runs` runs of one case.
    std::cerr << "series: storing " << series_runs << " runs of one case\n";
    {
      std::atomic<int> next{0};
      std::vector<std::thread> posters;
      for (int t = 0; t < 4; ++t) {
        posters.emplace_back([&] {
          kw::http::Client client(url, agent_token);
          for (int i; (i = next++) < series_runs;) {
            kw::testing::ReportSpec spec;
            spec.project = "series";
            spec.cases = 1;
            spec.samples = 30;
            spec.seed = static_cast<std::uint64_t>(1000000 + i);
            check(client.post("/api/v1/runs", kw::testing::make_report(spec)).status == 201,
                  "series seed ingest");
          }
        });
      }
      for (auto& poster : posters) poster.join();
      kw::http::Client client(url);
      // Uncached reads measure the query: the project's cached answers are
      // dropped before each, as a stored run of the project drops them.
      for (const auto& [label, query, cold] : std::vector<std::tuple<std::string, std::string, bool>>{
               {"1,000 newest points (default), uncached", "", true},
               {"1,000 newest points (default), cached", "", false},
               {"all 10,000 points, uncached", "&limit=10000", true}}) {
        std::string target =
            "/api/v1/projects/series/series?case=" + kw::http::url_encode("attention.fwd/case0") +
            "&gpu=" + kw::http::url_encode("NVIDIA H100 80GB HBM3") + query;
        std::size_t points = client.get(target).json()["run_id"].size();
        std::vector<double> latencies;
        int queries = query.empty() ? series_queries : std::max(20, series_queries / 10);
        auto start = Clock::now();
        for (int i = 0; i < queries; ++i) {
          if (cold) app.read_cache().changed("series");
          auto t0 = Clock::now();
          auto response = client.get(target);
          latencies.push_back(ms_since(t0));
          check(response.status == 200, "series answered " + std::to_string(response.status));
        }
        results.push_back(
            summarize("series of 1 case over " + std::to_string(series_runs) + " runs: " + label, latencies,
                      ms_since(start), std::to_string(points) + " points"));
      }
    }

    // 3. Claims: `agents` concurrent agents draining `claim_jobs` jobs.
    std::cerr << "claims: " << agents << " agents, " << claim_jobs << " jobs\n";
    {
      std::atomic<int> next{0};
      std::vector<std::thread> submitters;
      for (int t = 0; t < 4; ++t) {
        submitters.emplace_back([&] {
          kw::http::Client client(url, ci_token);
          for (int i; (i = next++) < claim_jobs;) {
            json body{{"project", "claims"},
                      {"commit", kw::testing::make_commit(static_cast<std::uint64_t>(i + 1))},
                      {"branch", "main"}};
            check(client.post("/api/v1/jobs", body).status == 201, "job submit");
          }
        });
      }
      for (auto& submitter : submitters) submitter.join();
      std::mutex mutex;
      std::vector<double> latencies;
      std::vector<std::int64_t> claimed;
      std::vector<std::thread> claimers;
      auto start = Clock::now();
      for (int a = 0; a < agents; ++a) {
        claimers.emplace_back([&, a] {
          kw::http::Client client(url, agent_token);
          json body{{"agent", "bench-agent-" + std::to_string(a)}, {"gpus", {"NVIDIA H100 80GB HBM3"}}};
          for (;;) {
            auto t0 = Clock::now();
            auto response = client.post("/api/v1/agents/claim", body);
            double elapsed = ms_since(t0);
            if (response.status == 204) return;
            check(response.status == 200, "claim answered " + std::to_string(response.status));
            std::lock_guard lock(mutex);
            latencies.push_back(elapsed);
            claimed.push_back(response.json()["id"].get<std::int64_t>());
          }
        });
      }
      for (auto& claimer : claimers) claimer.join();
      double wall = ms_since(start);
      std::set<std::int64_t> unique(claimed.begin(), claimed.end());
      std::string note = std::to_string(claimed.size()) + " claims, " + std::to_string(unique.size()) +
                         " distinct jobs, double claims: " + std::to_string(claimed.size() - unique.size());
      check(unique.size() == claimed.size() && claimed.size() == static_cast<std::size_t>(claim_jobs),
            "double or missed claims: " + note);
      results.push_back(
          summarize("claim with " + std::to_string(agents) + " concurrent agents", latencies, wall, note));
    }
    // 4. Reads while `load_posters` agents post reports back to back: a read
    // must not queue behind ingest (#17: the series p99 was 135 ms and
    // /healthz's 79 ms with 8 posters when handlers ran on the I/O threads).
    std::cerr << "reads under load: " << load_posters << " agents posting\n";
    {
      const std::string series =
          "/api/v1/projects/series/series?case=" + kw::http::url_encode("attention.fwd/case0") +
          "&gpu=" + kw::http::url_encode("NVIDIA H100 80GB HBM3");
      auto read_latencies = [&](const std::string& target, int queries, bool cold = false) {
        kw::http::Client client(url);
        std::vector<double> latencies;
        for (int i = 0; i < queries; ++i) {
          if (cold) app.read_cache().changed("series");
          auto t0 = Clock::now();
          auto response = client.get(target);
          latencies.push_back(ms_since(t0));
          check(response.status == 200, target + " answered " + std::to_string(response.status));
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return latencies;
      };
      for (const auto& [target, label, cold] : std::vector<std::tuple<std::string, std::string, bool>>{
               {series, "GET /api/v1/projects/series/series, idle, uncached", true},
               {series, "GET /api/v1/projects/series/series, idle, cached", false},
               {"/healthz", "GET /healthz, idle", false}}) {
        auto start = Clock::now();
        auto latencies = read_latencies(target, load_queries, cold);
        results.push_back(summarize(label, latencies, ms_since(start)));
      }
      // Posting into another project leaves the series' cached answer valid;
      // posting into its own project drops it with every run stored.
      for (const std::string posted_project : {"load", "series"}) {
        std::atomic<bool> stop{false};
        std::atomic<int> posted{0};
        std::vector<std::thread> posters;
        auto start = Clock::now();
        for (int t = 0; t < load_posters; ++t) {
          posters.emplace_back([&, t] {
            kw::http::Client client(url, agent_token);
            for (int i = 0; !stop; ++i) {
              kw::testing::ReportSpec spec;
              spec.project = posted_project;
              spec.cases = load_cases;
              spec.seed = static_cast<std::uint64_t>(5000000 + t * 100000 + i);
              check(client.post("/api/v1/runs", kw::testing::make_report(spec)).status == 201, "load ingest");
              ++posted;
            }
          });
        }
        std::vector<double> series_latencies, health_latencies;
        std::thread health([&] { health_latencies = read_latencies("/healthz", load_queries); });
        series_latencies = read_latencies(series, load_queries);
        health.join();
        stop = true;
        for (auto& poster : posters) poster.join();
        const double wall = ms_since(start);
        const std::string note = std::to_string(posted.load()) + " reports of " + std::to_string(load_cases) +
                                 " cases x 30 samples posted (" +
                                 std::to_string(static_cast<int>(posted.load() / (wall / 1000))) + "/s)";
        results.push_back(summarize("GET /api/v1/projects/series/series while " +
                                        std::to_string(load_posters) + " agents post to " + posted_project,
                                    series_latencies, wall, note));
        results.push_back(summarize(
            "GET /healthz while " + std::to_string(load_posters) + " agents post to " + posted_project,
            health_latencies, wall, note));
      }
    }
    // 5. A run of the most cases a report may hold, read back a page at a
    // time (#17: a 100,000-case run was one 87 MB answer, built whole).
    std::cerr << "large run: " << large_cases << " cases\n";
    {
      kw::http::Client client(url, agent_token);
      kw::testing::ReportSpec spec;
      spec.project = "large";
      spec.cases = large_cases;
      std::string body = kw::testing::make_report(spec).dump();
      auto t0 = Clock::now();
      auto posted = client.request("POST", "/api/v1/runs", body);
      check(posted.status == 201, "large ingest answered " + std::to_string(posted.status));
      results.push_back(summarize("ingest one run of " + std::to_string(large_cases) + " cases (" +
                                      std::to_string(body.size() >> 20) + " MiB)",
                                  {ms_since(t0)}, ms_since(t0)));
      const std::string run = "/api/v1/runs/" + std::to_string(posted.json()["run_id"].get<std::int64_t>());
      for (int per_page : {500, 2000}) {
        std::vector<double> latencies;
        std::size_t bytes = 0, cases = 0;
        auto start = Clock::now();
        for (int page = 1;; ++page) {
          auto t1 = Clock::now();
          auto response =
              client.get(run + "?per_page=" + std::to_string(per_page) + "&page=" + std::to_string(page));
          latencies.push_back(ms_since(t1));
          check(response.status == 200, "run page answered " + std::to_string(response.status));
          bytes = std::max(bytes, response.body.size());
          json answer = json::parse(response.body);
          cases += answer["cases"].size();
          if (page >= answer["paging"]["pages"].get<int>()) break;
        }
        check(cases == static_cast<std::size_t>(large_cases), "pages did not hold every case");
        results.push_back(summarize("GET the run by pages of " + std::to_string(per_page) + " cases",
                                    latencies, ms_since(start),
                                    "largest page " + std::to_string(bytes >> 10) + " KiB; every case in " +
                                        std::to_string(static_cast<int>(ms_since(start))) + " ms"));
      }
      std::vector<double> latencies;
      std::size_t bytes = 0;
      auto start = Clock::now();
      for (int i = 0; i < 20; ++i) {
        app.read_cache().changed("large");  // the query's time, not the cache's
        auto t1 = Clock::now();
        auto response = client.get("/api/v1/projects/large/overview");
        latencies.push_back(ms_since(t1));
        check(response.status == 200, "overview answered " + std::to_string(response.status));
        bytes = response.body.size();
      }
      results.push_back(summarize(
          "GET the overview's first page (500 of " + std::to_string(large_cases) + " cases), uncached",
          latencies, ms_since(start), std::to_string(bytes >> 10) + " KiB"));
    }
    app.stop();
    app.wait();
  } catch (const std::exception& error) {
    std::cerr << "kw-server-bench: " << error.what() << "\n";
    std::filesystem::remove_all(dir);
    return 1;
  }
  std::filesystem::remove_all(dir);

  std::cout << "| measurement | requests | p50 ms | p99 ms | req/s | note |\n|---|---|---|---|---|---|\n";
  json out = json::array();
  for (const Result& r : results) {
    char line[512];
    std::snprintf(line, sizeof(line), "| %s | %zu | %.2f | %.2f | %.0f | %s |\n", r.name.c_str(), r.requests,
                  r.p50_ms, r.p99_ms, r.per_second, r.note.c_str());
    std::cout << line;
    out.push_back({{"name", r.name},
                   {"requests", r.requests},
                   {"p50_ms", r.p50_ms},
                   {"p99_ms", r.p99_ms},
                   {"per_second", r.per_second},
                   {"note", r.note}});
  }
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  return 0;
}
