#include "app.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>

#include "errors.hpp"
#include "log_line.hpp"
#include "notify/notifier.hpp"
#include "store/detection_repository.hpp"
#include "store/job_repository.hpp"
#include "store/migrations.hpp"
#include "store/notification_outbox.hpp"
#include "store/profile_repository.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"
#include "store/upload_repository.hpp"

namespace kw::server {

std::vector<Statement> all_statements() {
  std::vector<Statement> statements;
  for (auto part :
       {TokenRepository::statements(), RunRepository::statements(), JobRepository::statements(),
        DetectionRepository::statements(), ProfileRepository::statements(), PgHistoryReads::statements()}) {
    statements.insert(statements.end(), part.begin(), part.end());
  }
  return statements;
}

namespace {

using nlohmann::json;

std::string upload_metrics(const OpenUploads& open) {
  return "# HELP kw_uploads_open Report uploads begun and not completed.\n# TYPE kw_uploads_open gauge\n"
         "kw_uploads_open " +
         std::to_string(open.count) +
         "\n# HELP kw_upload_bytes What the uploads not completed hold, as stored (gzip) and decoded.\n"
         "# TYPE kw_upload_bytes gauge\nkw_upload_bytes{form=\"stored\"} " +
         std::to_string(open.stored_bytes) + "\nkw_upload_bytes{form=\"decoded\"} " +
         std::to_string(open.decoded_bytes) + "\n";
}

bool reads_need_token(const ServerOptions& options) {
  if (options.reads_need_token) return true;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(options.http.address, ec);
  bool loopback = !ec && address.is_loopback();
  return !loopback && !options.open_reads;
}

}  // namespace

App::App(ServerOptions options) : options_(std::move(options)) {
  {
    pqxx::connection connection(options_.database_url);
    schema_version_ = apply_migrations(connection);
  }
  monitor_ = std::make_unique<DatabaseMonitor>(options_.database_url);
  // One per read and small-write thread, two per ingest thread (an ingest
  // stores on one while detection reads on the other), one each for the
  // lease reaper and the notifier, and a spare.
  const auto connections = static_cast<std::size_t>(std::max(1, options_.http.read_threads)) +
                           static_cast<std::size_t>(std::max(1, options_.http.small_write_threads)) +
                           2 * static_cast<std::size_t>(std::max(1, options_.http.write_threads)) + 3;
  pool_ =
      std::make_unique<ConnectionPool>(options_.database_url, connections, all_statements(), monitor_.get(),
                                       std::chrono::seconds(2), options_.statement_timeout);
  router_ = std::make_unique<Router>(
      [this](const std::string& token) {
        return with_transaction(*pool_,
                                [&](pqxx::work& tx) { return TokenRepository::authenticate(tx, token); });
      },
      metrics_, reads_need_token(options_));
  body_memory_ = std::make_unique<common::MemoryBudget>(options_.http.body_memory);
  router_->set_body_decoding(options_.http.decoded_body_limit, body_memory_.get());
  read_cache_ = std::make_unique<ReadCache>(options_.read_cache_bytes);
  open_read_replica(connections);
  // Without the feed the cache stays off, and every read runs on the primary.
  if (options_.read_cache_bytes > 0 || replica_pool_)
    change_feed_ = std::make_unique<ChangeFeed>(options_.database_url, *read_routing_);
  add_metrics_sources();
  services_ = std::make_unique<Services>(*pool_, *read_routing_, options_.notifications,
                                         QueueSettings{options_.lease_seconds, options_.max_attempts},
                                         UploadLimits{options_.http.decoded_body_limit, options_.uploads});
  services_->ingest.set_body_memory(body_memory_.get());
  add_routes();
  http_ = std::make_unique<HttpServer>(
      options_.http, [this](Request& request) { return router_->handle(request); },
      [this]() -> std::optional<Response> {
        if (monitor_->available()) return std::nullopt;
        return Response::error(503, "database_unavailable", monitor_->problem());
      },
      [this](Request& head, std::size_t body_bytes) { return router_->admit(head, body_bytes); });
  notifier_ = std::make_unique<Notifier>(*pool_, options_.notifications);
}

void App::add_routes() {
  DatabaseMonitor& monitor = *monitor_;
  health_context_ = std::make_unique<HealthContext>(
      HealthContext{[&monitor]() -> std::optional<std::string> {
                      if (monitor.available()) return std::nullopt;
                      return monitor.problem();
                    },
                    [&monitor] { return monitor.last_ping_ms(); }, metrics_, schema_version_});
  add_health_routes(*router_, *health_context_);
  add_run_routes(*router_, services_->ingest, services_->runs);
  add_job_routes(*router_, services_->jobs);
  add_bisect_routes(*router_, services_->bisects);
  add_profile_routes(*router_, services_->profiles);
  add_agent_routes(*router_, services_->jobs);
  add_project_routes(*router_, services_->settings);
  history_reads_ = std::make_unique<PgHistoryReads>(*read_routing_);
  add_history_routes(*router_, *history_reads_, *read_cache_);
  add_token_routes(*router_, services_->tokens);
  add_upload_routes(*router_, services_->uploads_in_parts, services_->ingest);
  add_download_routes(*router_, options_.kw_binary);
  add_static_files(*router_, options_.dashboard_dir);
}

void App::open_read_replica(std::size_t connections) {
  if (!options_.read_database_url.empty()) {
    replica_monitor_ = std::make_unique<DatabaseMonitor>(options_.read_database_url, "read replica");
    try {
      // The reads only, but all statements: the repositories' reads run the
      // prepared ones.
      replica_pool_ = std::make_unique<ConnectionPool>(options_.read_database_url, connections,
                                                       all_statements(), replica_monitor_.get(),
                                                       std::chrono::seconds(2), options_.statement_timeout);
    } catch (const std::exception& error) {
      throw std::runtime_error(std::string("the read replica (--read-database-url) does not answer: ") +
                               error.what());
    }
  }
  read_routing_ =
      std::make_unique<ReadRouting>(*pool_, *read_cache_, replica_pool_.get(), replica_monitor_.get());
}

void App::add_metrics_sources() {
  metrics_.add_source([this](std::string& text) { ingest_metrics(text); });
  metrics_.add_source([this](std::string& text) { history_read_metrics(text); });
  metrics_.add_source([this](std::string& text) { pool_metrics(text); });
  metrics_.add_source([this](std::string& text) { read_cache_metrics(text); });
  metrics_.add_source([this](std::string& text) { body_memory_metrics(text); });
  metrics_.add_source([this](std::string& text) { database_metrics(text); });
}

void App::ingest_metrics(std::string& text) {
  text +=
      "# HELP kw_ingest_phase_seconds_total Time run reports spent in each phase of ingest.\n"
      "# TYPE kw_ingest_phase_seconds_total counter\n";
  for (std::size_t i = 0; i < IngestService::kPhaseNames.size(); ++i) {
    text += "kw_ingest_phase_seconds_total{phase=\"" + std::string(IngestService::kPhaseNames[i]) + "\"} " +
            std::to_string(services_->ingest.seconds(static_cast<IngestService::Phase>(i))) + "\n";
  }
}

void App::history_read_metrics(std::string& text) {
  const ReadRouting::Counters reads = read_routing_->counters();
  text +=
      "# HELP kw_history_reads_total History reads (projects, overview, cases, runs, series) by the "
      "database that served them.\n# TYPE kw_history_reads_total counter\n"
      "kw_history_reads_total{database=\"primary\"} " +
      std::to_string(reads.primary_reads) + "\nkw_history_reads_total{database=\"replica\"} " +
      std::to_string(reads.replica_reads) + "\n";
  if (!read_routing_->has_replica()) return;
  text +=
      "# HELP kw_replica_fallbacks_total Reads the replica failed, served by the primary instead.\n"
      "# TYPE kw_replica_fallbacks_total counter\nkw_replica_fallbacks_total " +
      std::to_string(reads.fallbacks) +
      "\n# HELP kw_replica_up Whether the read replica answered its last ping.\n"
      "# TYPE kw_replica_up gauge\nkw_replica_up " +
      std::string(reads.replica_up ? "1" : "0") + "\n";
}

void App::pool_metrics(std::string& text) {
  text +=
      "# HELP kw_db_pool_connections Database connections by state.\n# TYPE kw_db_pool_connections gauge\n";
  std::size_t in_use = pool_->in_use();
  text += "kw_db_pool_connections{state=\"in_use\"} " + std::to_string(in_use) + "\n";
  text += "kw_db_pool_connections{state=\"idle\"} " + std::to_string(pool_->size() - in_use) + "\n";
  text +=
      "# HELP kw_db_pool_waits_total Times a request waited for a free connection.\n"
      "# TYPE kw_db_pool_waits_total counter\nkw_db_pool_waits_total " +
      std::to_string(pool_->waits()) + "\n";
}

void App::read_cache_metrics(std::string& text) {
  const ReadCache::Counters cache = read_cache_->counters();
  text +=
      "# HELP kw_read_cache_requests_total Cached reads (series, overview) by outcome.\n"
      "# TYPE kw_read_cache_requests_total counter\n"
      "kw_read_cache_requests_total{outcome=\"hit\"} " +
      std::to_string(cache.hits) +
      "\n"
      "kw_read_cache_requests_total{outcome=\"miss\"} " +
      std::to_string(cache.misses) +
      "\n"
      "# HELP kw_read_cache_bytes Bytes of cached answers.\n# TYPE kw_read_cache_bytes gauge\n"
      "kw_read_cache_bytes " +
      std::to_string(cache.bytes) +
      "\n"
      "# HELP kw_read_cache_listening Whether changes are heard (the cache serves only then).\n"
      "# TYPE kw_read_cache_listening gauge\nkw_read_cache_listening " +
      std::string(change_feed_ && change_feed_->listening() ? "1" : "0") + "\n" +
      "# HELP kw_change_feed_connects_total Times the change feed started listening.\n"
      "# TYPE kw_change_feed_connects_total counter\nkw_change_feed_connects_total " +
      std::to_string(change_feed_ ? change_feed_->connects() : 0) + "\n";
}

void App::body_memory_metrics(std::string& text) {
  text +=
      "# HELP kw_body_memory_bytes Memory request bodies hold while inflated and parsed (an estimate), "
      "and its limit.\n# TYPE kw_body_memory_bytes gauge\nkw_body_memory_bytes{state=\"used\"} " +
      std::to_string(body_memory_->used()) + "\nkw_body_memory_bytes{state=\"limit\"} " +
      std::to_string(body_memory_->capacity()) + "\n";
}

void App::database_metrics(std::string& text) {
  text += "# HELP kw_db_up Whether the database answered its last ping.\n# TYPE kw_db_up gauge\nkw_db_up " +
          std::string(monitor_->available() ? "1" : "0") + "\n";
  // What needs the database is read by the background loop, never here:
  // /metrics answers at once whatever the database does.
  std::lock_guard lock(stored_metrics_mutex_);
  text += stored_metrics_;
}

App::~App() {
  stop();
  wait();
}

void App::start() {
  http_->start();
  if (options_.notifications.public_url.empty()) {
    options_.notifications.public_url =
        "http://" + options_.http.address + ":" + std::to_string(http_->port());
  }
  notifier_->start();
  reaper_ = std::thread([this] { reap_leases(); });
}

void App::stop() {
  http_->stop();
  {
    std::lock_guard lock(reaper_mutex_);
    reaper_stop_ = true;
  }
  reaper_wake_.notify_all();
}

void App::wait() {
  http_->wait();
  notifier_->stop();
  if (reaper_.joinable()) reaper_.join();
}

void App::refresh_stored_metrics() {
  try {
    std::string text = with_transaction(*pool_, [](pqxx::work& tx) {
      return job_metrics(JobRepository::counts_by_state(tx)) +
             notification_metrics(NotificationOutbox::health(tx)) +
             upload_metrics(UploadRepository::open_uploads(tx));
    });
    std::lock_guard lock(stored_metrics_mutex_);
    stored_metrics_ = std::move(text);
  } catch (const ServiceUnavailable&) {  // the database monitor logs that once
  } catch (const std::exception& error) {
    LogLine() << "kw-server: /metrics: " << error.what() << "\n";
  }
}

void App::maintain_storage() {
  try {
    auto transact = [this](auto&& body) { return with_transaction(*pool_, body); };
    transact([](pqxx::work& tx) { SampleRetention::ensure_months(tx); });
    const RetentionOutcome outcome = apply_retention(transact, options_.retention);
    for (const std::string& month : outcome.dropped)
      LogLine() << "kw-server: raw samples of " << month << " dropped (older than " << options_.retention.days
                << " days)\n";
    if (outcome.moved > 0)
      LogLine() << "kw-server: " << outcome.moved << " measurements' samples kept: their cases' newest "
                << options_.retention.runs << " judged runs\n";
  } catch (const ServiceUnavailable&) {  // the database monitor logs that once
  } catch (const std::exception& error) {
    LogLine() << "kw-server: sample retention: " << error.what() << "\n";
  }
}

void App::expire_uploads() {
  try {
    const std::int64_t expired = with_transaction(*pool_, [this](pqxx::work& tx) {
      return UploadRepository::expire(tx, options_.uploads.incomplete_minutes);
    });
    if (expired > 0)
      LogLine() << "kw-server: " << expired << " report upload(s) removed (incomplete for "
                << options_.uploads.incomplete_minutes << " min, or completed a day ago)\n";
  } catch (const ServiceUnavailable&) {  // the database monitor logs that once
  } catch (const std::exception& error) {
    LogLine() << "kw-server: report uploads: " << error.what() << "\n";
  }
}

void App::reap_leases() {
  // Also the period of the stored metrics: at most 5 s old.
  auto period =
      std::chrono::milliseconds(static_cast<int>(std::clamp(options_.lease_seconds / 4, 0.05, 5.0) * 1000));
  refresh_stored_metrics();
  maintain_storage();
  expire_uploads();
  auto maintained = std::chrono::steady_clock::now();
  auto uploads_expired = maintained;
  std::unique_lock lock(reaper_mutex_);
  while (!reaper_wake_.wait_for(lock, period, [this] { return reaper_stop_; })) {
    lock.unlock();
    if (std::chrono::steady_clock::now() - maintained > std::chrono::hours(1)) {
      maintain_storage();
      maintained = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - uploads_expired > std::chrono::minutes(1)) {
      expire_uploads();
      uploads_expired = std::chrono::steady_clock::now();
    }
    try {
      const ReaperPass pass = reaper_pass(services_->jobs, services_->ingest);
      if (pass.leases.requeued > 0)
        LogLine() << "kw-server: " << pass.leases.requeued << " expired lease(s) returned to the queue\n";
      if (!pass.leases.failed.empty())
        LogLine() << "kw-server: " << pass.leases.failed.size()
                  << " job(s) failed: their lease ran out on every attempt\n";
      for (const auto& [job, merged] : pass.merged)
        LogLine() << "kw-server: job " << job << ": its shards merged into run " << merged.run_id << "\n";
      refresh_stored_metrics();
    } catch (const ServiceUnavailable&) {  // the database monitor logs that once
    } catch (const std::exception& error) {
      LogLine() << "kw-server: lease reaper: " << error.what() << "\n";
    }
    lock.lock();
  }
}

}  // namespace kw::server
