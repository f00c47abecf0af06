#include "server_bench.hpp"

namespace kw::server::bench {

void ServerBench::add_options(CLI::App& cli) {
  cli.add_option(
         "--only", only,
         "run only these parts: ingest, series, claims, load, large, scale, history, replicas, downloads")
      ->delimiter(',');
  cli.add_option("--history-runs", history_runs, "runs of the project whose list endpoints are read")
      ->capture_default_str();
  cli.add_option("--history-cases", history_cases, "cases in each of those runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--replicas", replicas, "kw-server replicas on the one database, for --only replicas")
      ->capture_default_str()
      ->check(CLI::Range(2, 16));
  cli.add_option("--replica-posters", replica_posters, "agents posting, each through the replicas in turn")
      ->capture_default_str();
  cli.add_option("--replica-posts", replica_posts, "runs each of them posts")->capture_default_str();
  cli.add_flag("--streaming-replica", streaming_replica,
               "give every kw-server a streaming standby of the database for its history reads");
  cli.add_option("--stalled-downloads", stalled_downloads, "clients that ask for kw and read nothing")
      ->capture_default_str();
  cli.add_option("--kw-binary", kw_binary, "the kw served at /download/kw")->capture_default_str();
  cli.add_flag("--explain", explain, "print the plan of each list statement over the history project");
  cli.add_option("--ingest-runs", ingest_runs)->capture_default_str();
  cli.add_option("--series-runs", series_runs)->capture_default_str();
  cli.add_option("--series-queries", series_queries)->capture_default_str();
  cli.add_option("--claim-jobs", claim_jobs)->capture_default_str();
  cli.add_option("--agents", agents)->capture_default_str();
  cli.add_option("--threads", threads, "kw-server HTTP threads")->capture_default_str();
  cli.add_option("--load-posters", load_posters, "agents posting while reads are timed")
      ->capture_default_str();
  cli.add_option("--read-threads", read_threads, "kw-server threads running GET")->capture_default_str();
  cli.add_option("--write-threads", write_threads, "kw-server threads running writes with large bodies")
      ->capture_default_str();
  cli.add_option("--small-write-threads", small_write_threads, "kw-server threads running the other writes")
      ->capture_default_str();
  cli.add_option("--load-cases", load_cases, "cases in each report posted meanwhile")->capture_default_str();
  cli.add_option("--load-queries", load_queries, "reads timed, idle and under load")->capture_default_str();
  cli.add_option("--large-cases", large_cases, "cases of the run read back by pages")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--scale-cases", scale_cases,
                 "cases of the main runs posted gzip and judged (3 x 60 samples)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--scale-small-cases", scale_small_cases,
                 "the same with this many cases, to compare per case")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--json", json_out, "write results as JSON");
}

void ServerBench::run() {
  ServerOptions options = server_options();
  App server(options);
  server.start();
  app = &server;
  url = "http://127.0.0.1:" + std::to_string(server.port());
  {
    pqxx::connection connection(database_url);
    pqxx::work tx(connection);
    agent_token = TokenRepository::create(tx, "bench-agent", Scope::agent);
    ci_token = TokenRepository::create(tx, "bench-ci", Scope::ci);
    for (const char* project : {"ingest", "series", "claims", "load", "large", "history", "replicas"})
      RunRepository::create_project(tx, project, "main");
    tx.commit();
  }
  if (part("ingest")) run_ingest();
  if (part("series")) run_series();
  if (part("claims")) run_claims();
  if (part("load")) run_load();
  if (part("large")) run_large();
  if (part("scale")) run_scale();
  if (part("history")) run_history();
  if (part("replicas")) run_replicas();
  if (part("downloads") && !kw_binary.empty() && std::filesystem::exists(kw_binary)) run_downloads();
  server.stop();
  server.wait();
  app = nullptr;
}

ServerOptions ServerBench::server_options() const {
  ServerOptions options;
  options.http.port = 0;
  options.http.threads = threads;
  options.http.read_threads = read_threads;
  options.http.write_threads = write_threads;
  options.http.small_write_threads = small_write_threads;
  // Every client here shares 127.0.0.1, as agents behind one proxy would.
  options.http.max_connections_per_address = 256;
  options.database_url = database_url;
  options.read_database_url = read_database_url;
  options.kw_binary = kw_binary;
  return options;
}

void ServerBench::run_ingest() {
  // 1. Ingest: one agent posting 200-case x 100-sample reports back to back.
  std::cerr << "ingest: " << ingest_runs << " runs of 200 cases x 100 samples\n";
  kw::http::Client client(url, agent_token);
  std::vector<std::string> bodies;
  for (int i = 0; i < ingest_runs + 3; ++i) {
    kw::testing::ReportSpec spec;
    spec.project = "ingest";
    spec.cases = 200;
    spec.samples = 100;
    spec.seed = static_cast<std::uint64_t>(i) + 1;
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

void ServerBench::run_series() {
  // 2. Series over `series_runs` runs of one case.
  std::cerr << "series: storing " << series_runs << " runs of one case\n";
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
        spec.seed = 1000000 + static_cast<std::uint64_t>(i);
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
      if (cold) app->read_cache().changed("series");
      auto t0 = Clock::now();
      auto response = client.get(target);
      latencies.push_back(ms_since(t0));
      check(response.status == 200, "series answered " + std::to_string(response.status));
    }
    results.push_back(summarize("series of 1 case over " + std::to_string(series_runs) + " runs: " + label,
                                latencies, ms_since(start), std::to_string(points) + " points"));
  }
}

void ServerBench::run_claims() {
  // 3. Claims: `agents` concurrent agents draining `claim_jobs` jobs.
  std::cerr << "claims: " << agents << " agents, " << claim_jobs << " jobs\n";
  std::atomic<int> next{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      kw::http::Client client(url, ci_token);
      for (int i; (i = next++) < claim_jobs;) {
        json body{{"project", "claims"},
                  {"commit", kw::testing::make_commit(static_cast<std::uint64_t>(i) + 1)},
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

void ServerBench::run_load() {
  // 4. Reads while `load_posters` agents post reports back to back: a read
  // must not queue behind ingest (the series p99 was 135 ms and
  // /healthz's 79 ms with 8 posters when handlers ran on the I/O threads).
  std::cerr << "reads under load: " << load_posters << " agents posting\n";
  const std::string series =
      "/api/v1/projects/series/series?case=" + kw::http::url_encode("attention.fwd/case0") +
      "&gpu=" + kw::http::url_encode("NVIDIA H100 80GB HBM3");
  auto read_latencies = [&](const std::string& target, int queries, bool cold = false) {
    kw::http::Client client(url);
    std::vector<double> latencies;
    for (int i = 0; i < queries; ++i) {
      if (cold) app->read_cache().changed("series");
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
          spec.seed = 5000000 + static_cast<std::uint64_t>(t) * 100000 + static_cast<std::uint64_t>(i);
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
    results.push_back(summarize("GET /api/v1/projects/series/series while " + std::to_string(load_posters) +
                                    " agents post to " + posted_project,
                                series_latencies, wall, note));
    results.push_back(
        summarize("GET /healthz while " + std::to_string(load_posters) + " agents post to " + posted_project,
                  health_latencies, wall, note));
  }
}

void ServerBench::run_large() {
  // 5. A run of the most cases a report may hold, read back a page at a
  // time (a 100,000-case run was one 87 MB answer, built whole).
  std::cerr << "large run: " << large_cases << " cases\n";
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
    results.push_back(summarize("GET the run by pages of " + std::to_string(per_page) + " cases", latencies,
                                ms_since(start),
                                "largest page " + std::to_string(bytes >> 10) + " KiB; every case in " +
                                    std::to_string(static_cast<int>(ms_since(start))) + " ms"));
  }
  std::vector<double> latencies;
  std::size_t bytes = 0;
  auto start = Clock::now();
  for (int i = 0; i < 20; ++i) {
    app->read_cache().changed("large");  // the query's time, not the cache's
    auto t1 = Clock::now();
    auto response = client.get("/api/v1/projects/large/overview");
    latencies.push_back(ms_since(t1));
    check(response.status == 200, "overview answered " + std::to_string(response.status));
    bytes = response.body.size();
  }
  results.push_back(
      summarize("GET the overview's first page (500 of " + std::to_string(large_cases) + " cases), uncached",
                latencies, ms_since(start), std::to_string(bytes >> 10) + " KiB"));
}

std::map<std::string, std::int64_t> ServerBench::stored_bytes() const {
  pqxx::connection connection(database_url);
  pqxx::work tx(connection);
  std::map<std::string, std::int64_t> bytes;
  for (const auto& row : tx.exec("SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')"))
    bytes[row[0].as<std::string>()] = row[1].as<std::int64_t>();
  return bytes;
}

std::string ServerBench::growth_per_case_run(const std::map<std::string, std::int64_t>& before,
                                             double case_runs) const {
  std::vector<std::pair<double, std::string>> per_table;
  double total = 0;
  for (const auto& [table, after] : stored_bytes()) {
    auto was = before.find(table);
    const double grown = static_cast<double>(after - (was == before.end() ? 0 : was->second)) / case_runs;
    total += grown;
    if (grown >= 1) per_table.emplace_back(grown, table);
  }
  std::sort(per_table.rbegin(), per_table.rend());
  std::ostringstream note;
  note << std::fixed << std::setprecision(0) << total << " bytes stored a case-run (";
  for (std::size_t i = 0; i < per_table.size() && i < 6; ++i)
    note << (i ? ", " : "") << per_table[i].second << " " << per_table[i].first;
  note << ")";
  return note.str();
}

void ServerBench::run_scale() {
  // 6. Main runs of a large suite, as the agent sends them (gzip, every case
  // with 3 implementations x 6 replicates x 10 samples): each judged
  // against the run before it; the cost per case at `scale_cases` against
  // `scale_small_cases`, and what a case-run takes on disk.
  run_scale_project(scale_small_cases);
  run_scale_project(scale_cases);
}

void ServerBench::run_scale_project(int cases) {
  const std::string project = "scale-" + std::to_string(cases);
  {
    pqxx::connection connection(database_url);
    pqxx::work tx(connection);
    RunRepository::create_project(tx, project, "main");
    tx.commit();
  }
  std::cerr << "scale: " << cases << " cases, 3 implementations x 60 samples\n";
  kw::http::Client client(url, agent_token, std::chrono::minutes(5));
  constexpr int kRuns = 3;
  std::vector<double> judged_ms;
  std::size_t json_bytes = 0, gzip_bytes = 0;
  double gzip_ms = 0;
  std::map<std::string, std::int64_t> bytes_before;  // after the first run
  // Each phase's time over the judged runs (IngestService::Phase).
  std::vector<double> phase_seconds(IngestService::kPhaseNames.size());
  auto add_phases = [&](double sign) {
    for (std::size_t i = 0; i < phase_seconds.size(); ++i)
      phase_seconds[i] += sign * app->ingest().seconds(static_cast<IngestService::Phase>(i));
  };
  for (int run = 0; run < kRuns; ++run) {
    kw::testing::ReportSpec spec;
    spec.project = project;
    spec.commit = kw::testing::make_commit(700000 + static_cast<std::uint64_t>(cases) * 10 +
                                           static_cast<std::uint64_t>(run));
    spec.cases = cases;
    spec.samples = 10;
    spec.replicates = 6;
    spec.baselines = 2;
    spec.seed = static_cast<std::uint64_t>(run) + 1;
    const std::string body = kw::testing::make_report(spec).dump();
    auto t0 = Clock::now();
    const std::string compressed = kw::http::gzip_compress(body);
    gzip_ms = ms_since(t0);
    json_bytes = body.size();
    gzip_bytes = compressed.size();
    if (run > 0) add_phases(-1);
    auto t1 = Clock::now();
    auto posted = client.request("POST", "/api/v1/runs", compressed, {{"Content-Encoding", "gzip"}});
    const double ms = ms_since(t1);
    if (run > 0) add_phases(1);
    check(posted.status == 201,
          project + " ingest answered " + std::to_string(posted.status) + ": " + posted.body.substr(0, 300));
    // The first run has nothing to be judged against. What a case-run takes
    // is measured over the judged runs too: the first also makes each case's
    // head (case_heads), once per case, and has no comparisons to store.
    if (run > 0) judged_ms.push_back(ms);
    if (run == 0) bytes_before = stored_bytes();
    std::cerr << "  run " << run << ": " << ms << " ms\n";
  }
  std::ostringstream note;
  note << std::fixed << std::setprecision(1) << (double(json_bytes) / (1 << 20)) << " MiB JSON, "
       << (double(gzip_bytes) / (1 << 20)) << " MiB gzip (compressed in " << std::setprecision(0) << gzip_ms
       << " ms); " << std::setprecision(1) << (kw::common::quantile(judged_ms, 0.5) * 1000 / cases)
       << " us a case; " << growth_per_case_run(bytes_before, double(cases) * (kRuns - 1))
       << "; ms a judged run by phase:";
  for (std::size_t i = 0; i < phase_seconds.size(); ++i) {
    note << (i == 0 ? " " : ", ") << IngestService::kPhaseNames[i] << " " << std::setprecision(0)
         << phase_seconds[i] * 1000 / static_cast<double>(judged_ms.size());
  }
  results.push_back(summarize(
      "POST a main run of " + std::to_string(cases) + " cases (gzip), judged against the run before",
      judged_ms, std::accumulate(judged_ms.begin(), judged_ms.end(), 0.0), note.str()));
#if KW_BENCH_REPORT_PARTS
  // A pull request run of as many cases, head and base measured in the job:
  // twice the samples, past one request's 16 MiB, so kw sends it in parts.
  kw::testing::ReportSpec spec;
  spec.project = project;
  spec.commit = kw::testing::make_commit(710000 + static_cast<std::uint64_t>(cases));
  spec.branch = "feature";
  spec.base_commit = kw::testing::make_commit(700000 + static_cast<std::uint64_t>(cases) * 10 + kRuns - 1);
  spec.ab = true;
  spec.cases = cases;
  spec.samples = 10;
  spec.replicates = 6;
  spec.baselines = 2;
  const nlohmann::json report = kw::testing::make_report(spec);
  const std::string report_text = report.dump();
  const std::size_t report_gzip = kw::http::gzip_compress(report_text).size();
  std::string said;
  auto t0 = Clock::now();
  auto stored =
      kw::agent::send_report(client, "/api/v1/runs", report, [&](const std::string& line) { said = line; });
  const double ms = ms_since(t0);
  check(stored.status == 201, project + " pull request in parts answered " + std::to_string(stored.status) +
                                  ": " + stored.body.substr(0, 300));
  std::ostringstream parts_note;
  parts_note << std::fixed << std::setprecision(1) << (double(report_text.size()) / (1 << 20))
             << " MiB JSON, " << (double(report_gzip) / (1 << 20)) << " MiB gzip; "
             << (said.empty() ? "one request" : said) << " of at most "
             << (kw::agent::upload_part_bytes() >> 20) << " MiB gzip, compressed, sent, stored and judged";
  results.push_back(summarize(
      "POST a pull request run of " + std::to_string(cases) + " cases, both sides measured, in parts", {ms},
      ms, parts_note.str()));
  std::cerr << "  pull request in parts: " << ms << " ms (" << parts_note.str() << ")\n";
#endif
}

void ServerBench::run_history() {
  // 6. Every list endpoint of a project with `history_runs` runs of
  // `history_cases` cases: none may cost more per row as history grows
  // (/cases recounted each case's runs for every row: 17.8 s at 3,305 runs).
  std::cerr << "history: storing " << history_runs << " runs of " << history_cases << " cases\n";
  const auto bytes_before = stored_bytes();
  std::atomic<int> next{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      kw::http::Client client(url, agent_token);
      for (int i; (i = next++) < history_runs;) {
        kw::testing::ReportSpec spec;
        spec.project = "history";
        spec.cases = history_cases;
        spec.samples = 10;
        spec.seed = 9000000 + static_cast<std::uint64_t>(i);
        spec.branch = i % 10 == 0 ? "feature-" + std::to_string(i % 50) : "main";
        check(client.post_gzip("/api/v1/runs", kw::testing::make_report(spec)).status == 201,
              "history ingest");
        if (i % 100 == 99) std::cerr << "  " << i + 1 << " runs stored\n";
      }
    });
  }
  for (auto& poster : posters) poster.join();
  // Reads are timed on statistics as autovacuum keeps them for a grown
  // project: right after this bulk load they are stale, and the overview
  // took 2 s instead of 40 ms until autovacuum's ANALYZE ran.
  {
    pqxx::connection connection(database_url);
    pqxx::nontransaction(connection).exec("ANALYZE");
  }
  const std::string shape =
      std::to_string(history_runs) + " runs of " + std::to_string(history_cases) + " cases";
  results.push_back(Result{"history stored: " + shape, 0, 0, 0, 0,
                           growth_per_case_run(bytes_before, double(history_runs) * history_cases)});
  std::cerr << "  " << results.back().note << "\n";
  kw::http::Client client(url);
  for (const std::string& target : std::vector<std::string>{
           "/api/v1/projects/history/cases", "/api/v1/projects/history/runs",
           "/api/v1/projects/history/regressions", "/api/v1/projects/history/branches",
           "/api/v1/projects/history/overview", "/api/v1/projects", "/api/v1/agents",
           "/api/v1/projects/history/series?case=" + kw::http::url_encode("attention.fwd/case0")}) {
    std::vector<double> latencies;
    std::size_t bytes = 0;
    auto start = Clock::now();
    for (int i = 0; i < 30; ++i) {
      app->read_cache().changed("history");
      auto t0 = Clock::now();
      auto response = client.get(target);
      latencies.push_back(ms_since(t0));
      check(response.status == 200, target + " answered " + std::to_string(response.status));
      bytes = response.body.size();
    }
    results.push_back(summarize("GET " + target + " of " + shape + ", uncached", latencies, ms_since(start),
                                std::to_string(bytes >> 10) + " KiB"));
  }
  // The statement /cases ran before, on the same data: what the fix is
  // measured against.
  {
    pqxx::connection connection(database_url);
    pqxx::nontransaction tx(connection);
    const std::string project_id =
        tx.exec1("SELECT id FROM projects WHERE name = 'history'")[0].as<std::string>();
    // --explain: each list statement's plan, as the server prepares it.
    const std::map<std::string, std::string> arguments = {
        {"cases_json", project_id},    {"runs_json", project_id + ", 'main', 100, 0, false, '', ''"},
        {"branches_json", project_id}, {"overview_json", project_id + ", 'main', '', 0, 500, '', ''"},
        {"projects_json", "NULL"},     {"series_json", "'history', 'attention.fwd/case0', 'main', '', 1000"}};
    for (const Statement& statement : PgHistoryReads::statements()) {
      auto it = arguments.find(statement.name);
      if (!explain || it == arguments.end()) continue;
      tx.exec(std::string("PREPARE ") + statement.name + " AS " + statement.sql);
      // After five executions PostgreSQL may keep a generic plan: the one a
      // server with a warm connection runs.
      for (int i = 0; i < 6; ++i) tx.exec(std::string("EXECUTE ") + statement.name + "(" + it->second + ")");
      std::cerr << "EXPLAIN ANALYZE " << statement.name << ":\n";
      for (const auto& row : tx.exec(std::string("EXPLAIN (ANALYZE, BUFFERS) EXECUTE ") + statement.name +
                                     "(" + it->second + ")"))
        std::cerr << "  " << row[0].c_str() << "\n";
    }
    // It counts every case's runs for every row of every run: hours at
    // 1,000 runs of 1,000 cases.
    if (history_cases > 3) return;
    std::vector<double> latencies;
    auto start = Clock::now();
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      tx.exec(
          "SELECT COALESCE(json_agg(x ORDER BY x.name), '[]')::text FROM (SELECT DISTINCT ON (c.name) "
          "c.name, c.params, c.run_id AS last_run_id, (SELECT count(*) FROM cases c2 WHERE c2.project_id "
          "= c.project_id AND c2.name = c.name) AS runs FROM cases c WHERE c.project_id = " +
          project_id + " ORDER BY c.name, c.run_id DESC) AS x");
      latencies.push_back(ms_since(t0));
    }
    results.push_back(summarize("the former /cases statement on the same project (SQL alone)", latencies,
                                ms_since(start), "a count per row"));
  }
}

void ServerBench::run_downloads() {
  // 7. Clients that ask for kw and read nothing: the server's memory must
  // not grow by a copy each (48 took it from 16 to 378 MB).
  auto rss_mib = [] {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
    }
    return 0.0;
  };
  check(kw::http::Client(url).get("/download/kw").status == 200, "/download/kw");
  const double before = rss_mib();
  auto start = Clock::now();
  boost::asio::io_context io;
  std::vector<boost::asio::ip::tcp::socket> stalled;
  for (int i = 0; i < stalled_downloads; ++i) {
    stalled.emplace_back(io);
    stalled.back().connect({boost::asio::ip::make_address("127.0.0.1"), app->port()});
    boost::asio::write(stalled.back(),
                       boost::asio::buffer(std::string("GET /download/kw HTTP/1.1\r\nHost: x\r\n\r\n")));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double grown = rss_mib() - before;
  stalled.clear();
  char note[160];
  std::snprintf(note, sizeof(note), "kw of %.1f MiB; RSS grew %.1f MiB",
                static_cast<double>(std::filesystem::file_size(kw_binary)) / 1048576.0, grown);
  results.push_back(summarize(std::to_string(stalled_downloads) + " clients download kw and read nothing",
                              {ms_since(start)}, ms_since(start), note));
}

void print_results(const std::vector<Result>& results, const std::string& json_out) {
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
}

}  // namespace kw::server::bench

using kw::server::EmbeddedPostgres;
using kw::server::bench::ServerBench;

int main(int argc, char** argv) {
  CLI::App cli{"kw-server-bench"};
  ServerBench bench;
  bench.add_options(cli);
  CLI11_PARSE(cli, argc, argv);

  char pattern[] = "/tmp/kw-server-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  std::filesystem::path dir = pattern;
  try {
    EmbeddedPostgres postgres(dir);
    postgres.start();
    bench.database_url = postgres.url();
    std::unique_ptr<EmbeddedPostgres> standby;
    if (bench.streaming_replica) {
      standby = std::make_unique<EmbeddedPostgres>(dir / "standby");
      standby->make_standby_of(postgres);
      standby->start();
      bench.read_database_url = standby->url();
    }
    bench.run();
  } catch (const std::exception& error) {
    std::cerr << "kw-server-bench: " << error.what() << "\n";
    std::filesystem::remove_all(dir);
    return 1;
  }
  std::filesystem::remove_all(dir);
  print_results(bench.results, bench.json_out);
  return 0;
}
