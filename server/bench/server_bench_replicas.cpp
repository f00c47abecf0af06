// kw-server-bench --only replicas: several kw-servers on one database, each
// (with --streaming-replica) reading from a streaming standby of its own.
#include "server_bench.hpp"

namespace kw::server::bench {

// What the replicas part counts, from every thread.
struct ReplicaTally {
  std::mutex mutex;
  std::vector<double> post_ms, own_read_ms, other_visible_ms, reader_ms;
  std::atomic<int> errors{0}, stale{0}, posted{0};
  std::string first_error;

  void error(const std::string& what) {
    std::lock_guard lock(mutex);
    if (errors++ == 0) first_error = what;
  }
};

namespace {

bool series_holds(const kw::http::Response& response, std::int64_t run_id) {
  const json body = response.json();
  for (const json& id : body.at("run_id"))
    if (id.get<std::int64_t>() == run_id) return true;
  return false;
}

}  // namespace

void ServerBench::post_through_replicas(int agent, const std::vector<std::string>& urls,
                                        const std::string& series, ReplicaTally& tally) const {
  std::vector<std::unique_ptr<kw::http::Client>> posting_to, reading_from;
  for (const std::string& replica : urls) {
    posting_to.push_back(std::make_unique<kw::http::Client>(replica, agent_token));
    reading_from.push_back(std::make_unique<kw::http::Client>(replica));
  }
  for (int i = 0; i < replica_posts; ++i) {
    const std::size_t via = static_cast<std::size_t>(agent + i) % urls.size();
    kw::testing::ReportSpec spec;
    spec.project = "replicas";
    spec.cases = 20;
    spec.samples = 10;
    spec.agent = "replica-agent-" + std::to_string(agent);
    spec.seed = 5000000 + static_cast<std::uint64_t>(agent) * 100000 + static_cast<std::uint64_t>(i);
    auto t0 = Clock::now();
    auto response = posting_to[via]->post("/api/v1/runs", kw::testing::make_report(spec));
    const double post = ms_since(t0);
    if (response.status != 201) {
      tally.error("post: " + std::to_string(response.status) + " " + response.body.substr(0, 200));
      continue;
    }
    ++tally.posted;
    const auto run_id = response.json().at("run_id").get<std::int64_t>();
    auto t1 = Clock::now();
    if (!series_holds(reading_from[via]->get(series), run_id)) ++tally.stale;
    const double own = ms_since(t1);
    // Another replica, polled until it serves the run.
    const std::size_t other = (via + 1) % urls.size();
    auto t2 = Clock::now();
    while (!series_holds(reading_from[other]->get(series), run_id) && ms_since(t2) < 5000) {
    }
    const double elsewhere = ms_since(t2);
    std::lock_guard lock(tally.mutex);
    tally.post_ms.push_back(post);
    tally.own_read_ms.push_back(own);
    tally.other_visible_ms.push_back(elsewhere);
  }
}

void ServerBench::run_replicas() {
  // 7. `replicas` kw-servers on one PostgreSQL: agents post runs through each
  // in turn and read their own write back from the server that took it
  // (the series of a case every run has), while readers keep every
  // replica's cache warm. A read that misses a run its client was answered
  // for is stale; how long another replica takes to serve it is the change
  // feed's delay.
  std::cerr << "replicas: " << replicas << " servers, " << replica_posters << " agents posting "
            << replica_posts << " runs each\n";
  std::vector<std::unique_ptr<App>> servers;
  std::vector<std::string> urls = {url};
  for (int i = 1; i < replicas; ++i) {
    servers.push_back(std::make_unique<App>(server_options()));
    servers.back()->start();
    urls.push_back("http://127.0.0.1:" + std::to_string(servers.back()->port()));
  }
  auto history_reads = [&] {
    ReadRouting::Counters sum = app->read_routing().counters();
    for (const auto& server : servers) {
      const ReadRouting::Counters counters = server->read_routing().counters();
      sum.primary_reads += counters.primary_reads;
      sum.replica_reads += counters.replica_reads;
      sum.fallbacks += counters.fallbacks;
    }
    return sum;
  };
  const ReadRouting::Counters reads_before = history_reads();
  const std::string series =
      "/api/v1/projects/replicas/series?case=" + kw::http::url_encode("attention.fwd/case0");
  ReplicaTally tally;
  std::atomic<bool> posting{true};
  std::vector<std::thread> readers;
  for (const std::string& replica : urls) {
    readers.emplace_back([&, replica] {
      kw::http::Client client(replica);
      while (posting) {
        auto t0 = Clock::now();
        auto response = client.get(series);
        const double ms = ms_since(t0);
        if (response.status != 200) tally.error("reader: " + std::to_string(response.status));
        std::lock_guard lock(tally.mutex);
        tally.reader_ms.push_back(ms);
      }
    });
  }
  std::vector<std::thread> posters;
  for (int a = 0; a < replica_posters; ++a)
    posters.emplace_back([&, a] { post_through_replicas(a, urls, series, tally); });
  const auto start = Clock::now();
  for (auto& poster : posters) poster.join();
  const double wall = ms_since(start);
  posting = false;
  for (auto& reader : readers) reader.join();
  const ReadRouting::Counters reads = history_reads();
  for (auto& server : servers) {
    server->stop();
    server->wait();
  }
  std::ostringstream note;
  note << replicas << " replicas, " << tally.posted << " runs posted, " << tally.errors << " errors"
       << (tally.first_error.empty() ? "" : " (first: " + tally.first_error + ")") << ", " << tally.stale
       << " stale reads of the client's own write";
  if (!read_database_url.empty()) {
    note << "; history reads uncached: " << reads.replica_reads - reads_before.replica_reads
         << " on the streaming replica, " << reads.primary_reads - reads_before.primary_reads
         << " on the primary (the replica had not replayed a write they must see), "
         << reads.fallbacks - reads_before.fallbacks << " handed over by the replica";
  }
  results.push_back(summarize("POST a 20-case run through one of " + std::to_string(replicas) + " replicas",
                              tally.post_ms, wall, note.str()));
  results.push_back(
      summarize("the run read back from the replica that took it (series)", tally.own_read_ms, wall));
  results.push_back(summarize("another replica serves it after", tally.other_visible_ms, wall));
  results.push_back(summarize("series reads meanwhile, every replica", tally.reader_ms, wall));
  std::cerr << "  " << note.str() << "\n";
  check(tally.errors == 0 && tally.stale == 0, note.str());
}

}  // namespace kw::server::bench
