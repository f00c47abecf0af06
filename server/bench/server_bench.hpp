// kw-server-bench: ingest latency (200 cases x 100 samples), series query over
// 10,000 runs of one case, claim throughput with 50 concurrent agents, reads
// while agents post, a 10,000-case run read back by pages, main runs of
// 10,000 cases x 3 implementations posted gzip and judged (with the bytes a
// case-run takes on disk), every list endpoint of a project with 5,000 runs,
// and the server's memory while 48 clients download kw without reading,
// against a real kw-server (in-process, all HTTP over loopback) on a private
// embedded PostgreSQL. Prints a markdown table; --json writes the numbers.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <CLI/CLI.hpp>

#include "../../tests/support/report_factory.hpp"
#include "app.hpp"
#if KW_BENCH_REPORT_PARTS
#include "client/report_upload.hpp"
#endif
#include "kw/common/stats.hpp"
#include "kw/http/client.hpp"
#include "kw/http/gzip.hpp"
#include "store/embedded_postgres.hpp"
#include "store/history_reads.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"

namespace kw::server::bench {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Result {
  std::string name;
  std::size_t requests = 0;
  double p50_ms = 0, p99_ms = 0, per_second = 0;
  std::string note;
};

inline Result summarize(std::string name, std::vector<double> latencies_ms, double wall_ms,
                        std::string note = {}) {
  Result result{std::move(name),
                latencies_ms.size(),
                kw::common::quantile(latencies_ms, 0.5),
                kw::common::quantile(latencies_ms, 0.99),
                static_cast<double>(latencies_ms.size()) / (wall_ms / 1000),
                std::move(note)};
  std::cerr << "  " << result.name << ": p50 " << result.p50_ms << " ms, p99 " << result.p99_ms << " ms, "
            << result.per_second << " req/s\n";
  return result;
}

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// One run of the bench: its flags, the server under test, and the results so
// far. Each part is a method.
struct ReplicaTally;

struct ServerBench {
  int ingest_runs = 60, series_runs = 10000, series_queries = 500, claim_jobs = 5000, agents = 50,
      threads = 4, load_posters = 8, load_queries = 500, load_cases = 3, large_cases = 10000,
      read_threads = HttpOptions{}.read_threads, write_threads = HttpOptions{}.write_threads,
      small_write_threads = HttpOptions{}.small_write_threads;
  int replicas = 4, replica_posters = 8, replica_posts = 40;
  int history_runs = 5000, history_cases = 3, stalled_downloads = 48, scale_cases = 10000,
      scale_small_cases = 200;
  std::string json_out, kw_binary = KW_BENCH_KW_BINARY;
  std::set<std::string> only;
  bool explain = false;
  bool streaming_replica = false;

  App* app = nullptr;
  std::string database_url, read_database_url, url, agent_token, ci_token;
  std::vector<Result> results;

  void add_options(CLI::App& cli);
  bool part(const char* name) const { return only.empty() || only.count(name) > 0; }
  // Starts kw-server on `database_url` and runs the parts selected.
  void run();
  void run_ingest();
  void run_series();
  void run_claims();
  void run_load();
  void run_large();
  void run_scale();
  void run_scale_project(int cases);
  std::map<std::string, std::int64_t> stored_bytes() const;  // per table, indexes and TOAST included
  // "N bytes stored a case-run (the largest tables' shares)", grown since `before`.
  std::string growth_per_case_run(const std::map<std::string, std::int64_t>& before, double case_runs) const;
  void run_history();
  void run_replicas();
  void post_through_replicas(int agent, const std::vector<std::string>& urls, const std::string& series,
                             ReplicaTally& tally) const;
  void run_downloads();
  ServerOptions server_options() const;
};

}  // namespace kw::server::bench
