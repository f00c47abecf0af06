// kw-hostile-bench: what hostile clients cost a real kw-server (in-process,
// loopback HTTP, a private embedded PostgreSQL). Each line is one way a
// client could make it spend, measured:
// - unauthenticated gzip bodies of 30,000 members after a 60 MiB one, to
//   every kind of route, 8 at once: the server's CPU per request, and
//   /healthz's latency meanwhile;
// - a ci token's hostile JSON (60 MiB of `{}`, 32 MiB of `[`) gzip: peak RSS
//   growth per request against its decoded size, and 8 at once;
// - 100 report-part PUTs of the worst gzip ratio from one agent token: how
//   much the database grows, and how many the quota refused;
// - 128 connections without a token each sending a 15 MiB body: peak RSS
//   growth against --body-memory, and how many were answered before their
//   body;
// - 800 connections from 13 loopback addresses sending their requests a
//   byte every 2 s, reconnecting when closed, for 20 s: how many tokened
//   newcomers and /healthz probes were served meanwhile;
// - 64 shards of a 10,000-case report merged: peak RSS against parsing the
//   same report whole.
// Prints a markdown table.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "../../tests/support/process_memory.hpp"
#include "../../tests/support/report_factory.hpp"
#include "app.hpp"
#include "kw/common/json_in_parts.hpp"
#include "kw/common/shard_merge.hpp"
#include "kw/common/stats.hpp"
#include "kw/http/client.hpp"
#include "kw/http/gzip.hpp"
#include "store/embedded_postgres.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"

namespace {

using namespace kw::server;
using Clock = std::chrono::steady_clock;
using kw::testing::cpu_seconds;
using kw::testing::reset_peak_kib;
using kw::testing::status_kib;

const std::map<std::string, std::string> kGzip{{"Content-Encoding", "gzip"}};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void row(const std::string& what, const std::string& value) {
  std::cout << "| " << what << " | " << value << " |\n";
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

void unauthenticated(const std::string& url) {
  std::string bomb = kw::http::gzip_compress(std::string(std::size_t{60} << 20, '0'), 9);
  const std::string nothing = kw::http::gzip_compress("");
  for (int i = 0; i < 30000; ++i) bomb += nothing;
  const std::vector<std::pair<std::string, std::string>> targets = {
      {"POST", "/api/v1/runs"},  {"POST", "/api/v1/jobs"},         {"GET", "/api/v1/projects"},
      {"GET", "/healthz"},       {"POST", "/api/v1/agents/claim"}, {"PUT", "/api/v1/projects/demo/settings"},
      {"GET", "/api/v1/agents"}, {"POST", "/api/v1/runs"}};
  const double cpu_before = cpu_seconds();
  const auto started = Clock::now();
  std::vector<std::future<int>> hostile;
  for (const auto& [method, target] : targets) {
    hostile.push_back(std::async(std::launch::async, [&url, &bomb, method = method, target = target] {
      return kw::http::Client(url).request(method, target, bomb, kGzip).status;
    }));
  }
  std::vector<double> healthz;
  while (std::any_of(hostile.begin(), hostile.end(), [](auto& f) {
    return f.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  })) {
    const auto asked = Clock::now();
    kw::http::Client(url).get("/healthz");
    healthz.push_back(ms_since(asked));
  }
  for (auto& f : hostile) f.get();
  const double wall = ms_since(started);
  const double cpu = cpu_seconds() - cpu_before;
  row("8 unauthenticated gzip bodies (" + std::to_string(bomb.size() / 1024) +
          " KiB, 30,001 members) at once",
      fixed(wall, 0) + " ms wall, " + fixed(1000 * cpu / 8, 1) +
          " ms of CPU each (server and client); /healthz p99 " +
          (healthz.empty() ? std::string("-") : fixed(kw::common::quantile(healthz, 0.99), 1) + " ms"));
}

void hostile_json(const std::string& url, const std::string& ci_token, const std::string& agent_token) {
  std::string empties = "{\"cases\":[{}";
  while (empties.size() < (std::size_t{60} << 20)) empties += ",{}";
  empties += "]}";
  const std::string nested(std::size_t{32} << 20, '[');
  struct Body {
    std::string name, gzip;
    std::size_t decoded;
  };
  const std::vector<Body> bodies = {{"60 MiB of `{}`", kw::http::gzip_compress(empties, 9), empties.size()},
                                    {"32 MiB of `[`", kw::http::gzip_compress(nested, 9), nested.size()}};
  struct Route {
    std::string target, token, who;
  };
  // A job's body is small; a run report may hold more memory per byte.
  const std::vector<Route> routes = {{"/api/v1/jobs", ci_token, "ci token"},
                                     {"/api/v1/runs", agent_token, "agent token"}};
  for (const Route& route : routes) {
    for (const Body& body : bodies) {
      const long before = reset_peak_kib();
      const auto started = Clock::now();
      const int status =
          kw::http::Client(url, route.token).request("POST", route.target, body.gzip, kGzip).status;
      const double grown = static_cast<double>(status_kib("VmHWM") - before) * 1024;
      row("POST " + route.target + ", " + route.who + ", " + body.name + " as gzip",
          std::to_string(status) + " in " + fixed(ms_since(started), 0) + " ms; peak RSS +" +
              fixed(grown / 1048576, 0) + " MiB, " + fixed(grown / static_cast<double>(body.decoded), 1) +
              "x its decoded size");
    }
  }
  const long before = reset_peak_kib();
  std::vector<std::future<int>> at_once;
  for (int i = 0; i < 8; ++i) {
    at_once.push_back(std::async(std::launch::async, [&] {
      return kw::http::Client(url, ci_token).request("POST", "/api/v1/jobs", bodies[0].gzip, kGzip).status;
    }));
  }
  std::map<int, int> statuses;
  for (auto& f : at_once) ++statuses[f.get()];
  std::string answered;
  for (const auto& [status, count] : statuses)
    answered += std::to_string(count) + "x " + std::to_string(status) + " ";
  row("8 of the 60 MiB bodies at once",
      answered + "; peak RSS +" + fixed(static_cast<double>(status_kib("VmHWM") - before) / 1024, 0) +
          " MiB in all");
}

// The parser's estimate of what a document's value holds against the peak
// RSS of parsing it: the limits above rest on it.
void json_memory_estimates() {
  auto measure = [](const std::string& name, const std::string& text) {
    kw::common::MemoryBudget budget(std::size_t{1} << 40);
    malloc_trim(0);  // what the last document freed is not reused unseen
    const long before = reset_peak_kib();
    double estimated = 0;
    {
      kw::common::MemoryLease lease(&budget);
      const nlohmann::json value = kw::common::parse_in_parts(text, {64, SIZE_MAX, &lease});
      estimated = static_cast<double>(lease.held());
    }
    const double peak = static_cast<double>(status_kib("VmHWM") - before) * 1024;
    const double size = static_cast<double>(text.size());
    row("parsing " + name + " (" + fixed(size / 1048576, 1) + " MiB)",
        "estimated " + fixed(estimated / size, 2) + "x its size, peak RSS " + fixed(peak / size, 2) + "x");
  };
  kw::testing::ReportSpec ab;
  ab.cases = 2000;
  ab.samples = 60;
  ab.replicates = 3;
  ab.ab = true;
  ab.base_commit = kw::testing::make_commit(9);
  measure("a pull request's report, 2,000 cases of 3 x 60 samples a side",
          kw::testing::make_report(ab).dump());
  kw::testing::ReportSpec dense;
  dense.cases = 10000;
  dense.samples = 1;
  measure("a report of 10,000 cases of 1 sample", kw::testing::make_report(dense).dump());
  std::string empties = "{\"cases\":[{}";
  while (empties.size() < (std::size_t{40} << 20)) empties += ",{}";
  measure("`{}` elements", empties + "]}");
}

// Unauthenticated bodies: 128 at once, 15 MiB each, from one shared buffer.
// Each is answered on its header; what the server held is its peak RSS
// growth (the clients hold nothing of their own).
void unauthenticated_bodies(const std::string& url, std::size_t body_memory) {
  const auto port = static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)));
  const std::string body(std::size_t{15} * 1024 * 1024 - 1, 'x');
  malloc_trim(0);
  const long before = reset_peak_kib();
  std::vector<std::future<std::string>> clients;
  for (int i = 0; i < 128; ++i) {
    clients.push_back(std::async(std::launch::async, [&] {
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket socket(io);
      socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
      const std::string head =
          "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n\r\n";
      boost::system::error_code ec;
      boost::asio::write(socket, boost::asio::buffer(head), ec);
      boost::asio::write(socket, boost::asio::buffer(body), ec);  // cut short once answered
      std::string answer(64, '\0');
      answer.resize(socket.read_some(boost::asio::buffer(answer), ec));
      return answer.substr(0, 12);
    }));
  }
  int refused = 0;
  for (auto& client : clients) refused += client.get() == "HTTP/1.1 401";
  const double grown = static_cast<double>(status_kib("VmHWM") - before) / 1024;
  row("128 connections without a token, each sending a 15 MiB body",
      std::to_string(refused) + " of 128 answered 401 on their header; peak RSS +" + fixed(grown, 0) +
          " MiB (--body-memory " + std::to_string(body_memory >> 20) + " MiB)");
}

// 800 connections from 13 loopback addresses (the per-address cap is 64)
// send their request a byte every 2 s and open again when closed, for 20 s,
// while a client with a token and a probe each ask every 100 ms.
void slow_requests(const std::string& url, const std::string& read_token) {
  const auto port = static_cast<unsigned short>(std::stoi(url.substr(url.rfind(':') + 1)));
  constexpr int kAddresses = 13, kPerAddress = 62;
  constexpr auto kFor = std::chrono::seconds(20);
  const std::string request = "POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n";
  boost::asio::io_context io;
  struct Slow {
    boost::asio::ip::tcp::socket socket;
    boost::asio::steady_timer timer;
    std::size_t sent = 0;
    int address = 0;
  };
  std::vector<std::unique_ptr<Slow>> slow;
  std::atomic<int> opened{0};
  std::function<void(Slow&)> start, drip;
  start = [&](Slow& s) {
    boost::system::error_code ec;
    s.socket.close(ec);
    s.socket.open(boost::asio::ip::tcp::v4(), ec);
    s.socket.bind({boost::asio::ip::make_address("127.0.0." + std::to_string(10 + s.address)), 0}, ec);
    s.sent = 0;
    s.socket.async_connect({boost::asio::ip::make_address("127.0.0.1"), port},
                           [&](boost::system::error_code connect_ec) {
                             if (connect_ec) {
                               s.timer.expires_after(std::chrono::milliseconds(200));
                               return s.timer.async_wait([&](boost::system::error_code) { start(s); });
                             }
                             ++opened;
                             drip(s);
                           });
  };
  drip = [&](Slow& s) {
    s.timer.expires_after(std::chrono::seconds(2));
    s.timer.async_wait([&](boost::system::error_code) {
      boost::system::error_code ec;
      boost::asio::write(s.socket, boost::asio::buffer(request.data() + s.sent % request.size(), 1), ec);
      ++s.sent;
      if (ec) return start(s);  // closed by the server: open again, as the attack did
      drip(s);
    });
  };
  for (int a = 0; a < kAddresses; ++a) {
    for (int i = 0; i < kPerAddress; ++i) {
      slow.push_back(std::make_unique<Slow>(
          Slow{boost::asio::ip::tcp::socket(io), boost::asio::steady_timer(io), 0, a}));
      start(*slow.back());
    }
  }
  std::thread attack([&] { io.run_for(kFor + std::chrono::seconds(2)); });
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the slots fill
  int served = 0, asked = 0, probes_ok = 0;
  std::vector<double> latency;
  const auto until = Clock::now() + kFor - std::chrono::seconds(3);
  while (Clock::now() < until) {
    ++asked;
    const auto t = Clock::now();
    try {
      served += kw::http::Client(url, read_token).get("/api/v1/projects").status == 200;
      latency.push_back(ms_since(t));
      probes_ok += kw::http::Client(url).get("/healthz").status == 200;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  attack.join();
  row("800 connections from 13 addresses sending a byte every 2 s, reopened when closed (" +
          std::to_string(opened.load()) + " opened in 20 s)",
      std::to_string(served) + " of " + std::to_string(asked) + " tokened newcomers served (p99 " +
          (latency.empty() ? std::string("-") : fixed(kw::common::quantile(latency, 0.99), 0)) +
          " ms), /healthz " + std::to_string(probes_ok) + " of " + std::to_string(asked));
}

// Merging 64 shards of a 10,000-case report against parsing it whole: the
// merge takes the shards' cases rather than copying them.
void shard_merge_memory() {
  kw::testing::ReportSpec spec;
  spec.cases = 10000;
  spec.samples = 60;
  const nlohmann::json whole = kw::testing::make_report(spec);
  const std::string text = whole.dump();
  std::vector<std::string> shard_texts;
  for (int k = 0; k < 64; ++k) {
    nlohmann::json shard = whole;
    nlohmann::json mine = nlohmann::json::array();
    for (std::size_t i = static_cast<std::size_t>(k); i < whole["cases"].size(); i += 64)
      mine.push_back(whole["cases"][i]);
    shard["cases"] = std::move(mine);
    shard["shard"] = {{"index", k + 1}, {"count", 64}};
    shard["job_id"] = 100 + k;
    shard_texts.push_back(shard.dump());
  }
  auto peak_of = [](const std::function<void()>& work) {
    malloc_trim(0);
    const long before = reset_peak_kib();
    work();
    return static_cast<double>(status_kib("VmHWM") - before) / 1024;
  };
  const double parse = peak_of([&] {
    const kw::common::RunReport report = kw::common::parse_run_report(nlohmann::json::parse(text));
    (void)report;
  });
  const double merge = peak_of([&] {
    std::vector<nlohmann::json> reports;
    for (const std::string& shard : shard_texts) reports.push_back(nlohmann::json::parse(shard));
    const kw::common::MergedShards merged = kw::common::merge_shards(std::move(reports));
    (void)merged;
  });
  row("64 shards of a 10,000-case report (" + fixed(static_cast<double>(text.size()) / 1048576, 1) +
          " MiB) merged",
      "peak RSS +" + fixed(merge, 0) + " MiB, against +" + fixed(parse, 0) + " MiB to parse it whole (" +
          fixed(merge / parse, 2) + "x)");
}

void upload_parts(const std::string& url, const std::string& agent_token, const std::string& database_url) {
  const std::string padded = "{\"cases\":[]" + std::string(std::size_t{60} << 20, ' ') + "}";
  const std::string bomb = kw::http::gzip_compress(padded, 9);
  auto size = [&] {
    pqxx::connection connection(database_url);
    pqxx::work tx(connection);
    return tx.exec1("SELECT pg_database_size(current_database())")[0].as<std::int64_t>();
  };
  const std::int64_t before = size();
  std::map<int, int> statuses;
  kw::http::Client agent(url, agent_token);
  for (int u = 0; u < 100; ++u) {
    const std::string upload = "/api/v1/projects/demo/uploads/bomb-" + std::to_string(1000 + u);
    ++statuses[agent.request("PUT", upload + "/parts/0?of=2", bomb, kGzip).status];
  }
  std::string answered;
  for (const auto& [status, count] : statuses)
    answered += std::to_string(count) + "x " + std::to_string(status) + " ";
  row("100 part PUTs of " + std::to_string(bomb.size() / 1024) +
          " KiB gzip inflating to 60 MiB, one agent token",
      answered + "; database +" + fixed(static_cast<double>(size() - before) / 1048576, 1) + " MiB");
}

}  // namespace

int main() {
  char pattern[] = "/tmp/kw-hostile-bench-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  const std::filesystem::path dir = pattern;
  try {
    EmbeddedPostgres postgres(dir);
    postgres.start();
    ServerOptions options;
    options.http.port = 0;
    options.database_url = postgres.url();
    App server(options);
    server.start();
    const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
    std::string ci_token, agent_token, read_token;
    {
      pqxx::connection connection(postgres.url());
      pqxx::work tx(connection);
      ci_token = TokenRepository::create(tx, "bench-ci", Scope::ci);
      agent_token = TokenRepository::create(tx, "bench-agent", Scope::agent);
      read_token = TokenRepository::create(tx, "bench-read", Scope::read);
      RunRepository::create_project(tx, "demo", "main");
      tx.commit();
    }
    std::cout << "| hostile input | what it cost |\n|---|---|\n";
    json_memory_estimates();  // first: memory freed by the requests below would be reused
    unauthenticated(url);
    hostile_json(url, ci_token, agent_token);
    upload_parts(url, agent_token, postgres.url());
    unauthenticated_bodies(url, options.http.body_memory);
    slow_requests(url, read_token);
    shard_merge_memory();
    server.stop();
    server.wait();
  } catch (const std::exception& error) {
    std::cerr << "kw-hostile-bench: " << error.what() << "\n";
    std::filesystem::remove_all(dir);
    return 1;
  }
  std::filesystem::remove_all(dir);
  return 0;
}
