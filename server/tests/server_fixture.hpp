// Test fixtures for kw-server: a real PostgreSQL (the server's own embedded
// launcher), a fresh database per test, and a real HTTP server on a loopback
// port with one token per scope.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "app.hpp"
#include "kw/http/client.hpp"
#include "kw/schema/migrations.hpp"
#include "store/embedded_postgres.hpp"
#include "store/migrations.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"
#include "wait_until.hpp"

namespace kw::server::testing {

// The cluster: the one ctest's fixture started (KW_TEST_PG_DIR), or a private
// one in a temp dir for the life of this process.
inline EmbeddedPostgres& test_postgres() {
  static std::unique_ptr<EmbeddedPostgres> instance;
  static std::filesystem::path private_dir;
  if (!instance) {
    const char* shared = std::getenv("KW_TEST_PG_DIR");
    std::filesystem::path dir;
    if (shared != nullptr && *shared != '\0') {
      dir = shared;
    } else {
      char pattern[] = "/tmp/kw-test-pg-XXXXXX";
      if (mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
      dir = private_dir = pattern;
    }
    instance = std::make_unique<EmbeddedPostgres>(dir);
    instance->start();
    if (private_dir.empty()) instance->keep_running();  // ctest's cleanup fixture stops it
    std::atexit([] {
      instance.reset();
      if (!private_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(private_dir, ec);
      }
    });
  }
  return *instance;
}

// The whole schema, migrated once per cluster and named by the migrations'
// text: a test's database is a copy of it (CREATE DATABASE ... TEMPLATE)
// rather than an empty one migrated again, half a second less a test.
inline const std::string& migrated_template() {
  static const std::string name = [] {
    std::size_t digest = 0;
    for (const schema::Migration& migration : schema::kMigrations)
      digest = digest * 31 + std::hash<std::string_view>{}(migration.sql);
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016zx", digest);
    std::string made = std::string("kwtest_template_") + hex;
    EmbeddedPostgres& postgres = test_postgres();
    {
      pqxx::connection connection(postgres.url("postgres"));
      pqxx::nontransaction tx(connection);
      if (!tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", made).empty()) return made;
    }
    // Made under a name of its own and renamed once whole: a process that
    // finds the template finds it migrated, and of two processes making it
    // at once one rename wins and the other drops its copy.
    const std::string scratch = made + "_" + std::to_string(getpid());
    postgres.ensure_database(scratch);
    {
      pqxx::connection connection(postgres.url(scratch));
      apply_migrations(connection);
    }
    try {
      postgres.psql("postgres", "ALTER DATABASE " + scratch + " RENAME TO " + made);
    } catch (const pqxx::sql_error&) {
      postgres.drop_database(scratch);
    }
    return made;
  }();
  return name;
}

// A fresh database with the schema applied; dropped at destruction.
class TestDatabase {
 public:
  // `schema_version`: migrate only this far (tests of a later migration).
  explicit TestDatabase(int schema_version = INT_MAX) {
    static std::atomic<int> counter{0};
    name_ = "kwtest_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    if (schema_version == INT_MAX) {
      test_postgres().psql("postgres", "CREATE DATABASE " + name_ + " TEMPLATE " + migrated_template());
      return;
    }
    test_postgres().ensure_database(name_);
    pqxx::connection connection(url());
    apply_migrations(connection, schema_version);
  }
  ~TestDatabase() {
    try {
      test_postgres().drop_database(name_);
    } catch (const std::exception& error) {
      std::cerr << "dropping " << name_ << ": " << error.what() << "\n";
    }
  }
  std::string url() const { return test_postgres().url(name_); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

inline std::string create_token(const std::string& url, const std::string& name, Scope scope,
                                const std::optional<std::vector<std::string>>& projects = std::nullopt) {
  pqxx::connection connection(url);
  pqxx::work tx(connection);
  std::string token = TokenRepository::create(tx, name, scope, projects);
  tx.commit();
  return token;
}

// Projects are made by an admin; tests make theirs as kw-server project create does.
inline void create_project(const std::string& url, const std::string& name) {
  pqxx::connection connection(url);
  pqxx::work tx(connection);
  RunRepository::create_project(tx, name, "main");
  tx.commit();
}

// A sample's value in /metrics text ("NAME VALUE" lines); -1 when absent.
inline double metric_value(const std::string& metrics_text, const std::string& name) {
  const auto at = metrics_text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics_text.substr(at + name.size() + 2));
}

class ServerTest : public ::testing::Test {
 protected:
  virtual ServerOptions server_options() {
    ServerOptions options;
    options.http.port = 0;
    options.http.threads = 4;
    options.kw_binary = KW_TEST_KW_BINARY;  // the build's (empty without the agent)
    return options;
  }
  // Half-second leases and two attempts: the lease reaper's tests.
  static ServerOptions with_short_leases(ServerOptions options) {
    options.lease_seconds = 0.5;
    options.max_attempts = 2;
    return options;
  }

  void SetUp() override {
    database_ = std::make_unique<TestDatabase>();
    ServerOptions options = server_options();
    options.database_url = database_->url();
    app_ = std::make_unique<App>(options);
    app_->start();
    base_url_ = "http://127.0.0.1:" + std::to_string(app_->port());
    admin_token_ = create_token(database_->url(), "admin", Scope::admin);
    agent_token_ = create_token(database_->url(), "agent-1", Scope::agent);
    ci_token_ = create_token(database_->url(), "ci", Scope::ci);
    read_token_ = create_token(database_->url(), "reader", Scope::read);
    create_project("demo");
  }

  void create_project(const std::string& name) { testing::create_project(database_->url(), name); }

  void TearDown() override {
    app_.reset();
    database_.reset();
  }

  // Two minutes a step, not kw's 30 s: a hostile 60 MiB body parsed eight at
  // once on a loaded 2-core CI host took longer than 30 s to be answered.
  http::Client client(const std::string& token = {}) {
    return http::Client(base_url_, token, std::chrono::seconds(120));
  }
  http::Client agent() { return client(agent_token_); }
  http::Client ci() { return client(ci_token_); }

  // Runs SQL against the test's database directly (to check what was stored).
  pqxx::result sql(const std::string& query) {
    pqxx::connection connection(database_->url());
    pqxx::work tx(connection);
    pqxx::result result = tx.exec(query);
    tx.commit();
    return result;
  }

  std::unique_ptr<TestDatabase> database_;
  std::unique_ptr<App> app_;
  std::string base_url_;
  std::string admin_token_, agent_token_, ci_token_, read_token_;
};

}  // namespace kw::server::testing
