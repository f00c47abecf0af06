// kw-server as a whole: wires the store (database pool), the ingest service,
// the routes and the HTTP server, and runs the lease reaper.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "http/handlers/handlers.hpp"
#include "http/http_server.hpp"
#include "http/metrics.hpp"
#include "http/router.hpp"
#include "notify/notifier.hpp"
#include "service/read_cache.hpp"
#include "services.hpp"
#include "store/change_feed.hpp"
#include "store/database.hpp"
#include "store/history_reads.hpp"
#include "store/read_routing.hpp"
#include "store/sample_retention.hpp"
#include "store/upload_repository.hpp"

namespace kw::server {

struct ServerOptions {
  HttpOptions http;
  std::string database_url;
  // A streaming replica of it: the history reads go there where it has
  // replayed the writes they must see (store/read_routing.hpp). Empty: none.
  std::string read_database_url;
  double lease_seconds = 120;
  int max_attempts = 3;
  // Reads (GET endpoints, the dashboard) are open when the server listens on
  // loopback; on any other address they need a token unless `open_reads`.
  bool reads_need_token = false;
  bool open_reads = false;
  NotifierOptions notifications;
  std::string dashboard_dir;  // built dashboard (dashboards/dist); empty: none served
  std::string kw_binary;      // served at /download/kw; empty: none
  // A statement running longer is cancelled, and its request answered 503.
  std::chrono::milliseconds statement_timeout{30000};
  // How long raw samples are kept (store/sample_retention.hpp); applied at
  // start and hourly.
  RetentionPolicy retention;
  // What report uploads not yet completed may hold, per token and project.
  UploadQuota uploads;
  // Series and overview answers kept until their project is written; 0: none.
  std::size_t read_cache_bytes = 64u << 20;
};

class App {
 public:
  // Connects, applies pending migrations, and builds the routes.
  explicit App(ServerOptions options);
  ~App();

  void start();
  unsigned short port() const { return http_->port(); }
  // Graceful: in-flight requests finish; then the reaper stops.
  void stop();
  void wait();

  ConnectionPool& pool() { return *pool_; }
  ReadCache& read_cache() { return *read_cache_; }
  const IngestService& ingest() const { return services_->ingest; }
  const ReadRouting& read_routing() const { return *read_routing_; }
  Response handle(Request& request) { return router_->handle(request); }
  const Router& router() const { return *router_; }

 private:
  // The replica's pool and monitor, if one is named, and the routing of reads.
  void open_read_replica(std::size_t connections);
  // What /metrics shows, a source each.
  void add_metrics_sources();
  // Every route, each over its service (the health routes over the monitor).
  void add_routes();
  void ingest_metrics(std::string& text);
  void history_read_metrics(std::string& text);
  void pool_metrics(std::string& text);
  void read_cache_metrics(std::string& text);
  void body_memory_metrics(std::string& text);
  void database_metrics(std::string& text);
  // The lease reaper's loop, which also reads what /metrics shows from the
  // database (job counts, notification targets).
  void reap_leases();
  void refresh_stored_metrics();
  // Makes the coming months' sample partitions and drops the expired ones.
  void maintain_storage();
  // Removes report uploads left incomplete, and completed ones after a day.
  void expire_uploads();

  ServerOptions options_;
  Metrics metrics_;
  std::unique_ptr<common::MemoryBudget> body_memory_;
  std::unique_ptr<DatabaseMonitor> monitor_;
  std::unique_ptr<ConnectionPool> pool_;
  std::unique_ptr<ReadCache> read_cache_;
  std::unique_ptr<DatabaseMonitor> replica_monitor_;
  std::unique_ptr<ConnectionPool> replica_pool_;
  std::unique_ptr<ReadRouting> read_routing_;
  std::unique_ptr<HistoryReads> history_reads_;
  std::unique_ptr<ChangeFeed> change_feed_;
  std::unique_ptr<Services> services_;
  std::unique_ptr<HealthContext> health_context_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<Notifier> notifier_;
  int schema_version_ = 0;

  std::thread reaper_;
  std::mutex reaper_mutex_;
  std::condition_variable reaper_wake_;
  bool reaper_stop_ = false;
  std::mutex stored_metrics_mutex_;
  std::string stored_metrics_;
};

}  // namespace kw::server
