// kw-server: the kernelwatch HTTP API over PostgreSQL.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "app.hpp"
#include "kw/common/run_report.hpp"
#include "store/embedded_postgres.hpp"
#include "store/migrations.hpp"
#include "store/run_repository.hpp"
#include "store/token_repository.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kw::server;

struct DatabaseChoice {
  std::string data_dir;
  std::string database_url;
  std::string pg_user;
};

void add_database_options(CLI::App& command, DatabaseChoice& choice) {
  command.add_option("--data-dir", choice.data_dir, "directory of the embedded PostgreSQL cluster")
      ->default_val(".kw/data");
  command.add_option("--database-url", choice.database_url,
                     "use this PostgreSQL (postgresql://...) instead of the embedded one");
  command.add_option("--pg-user", choice.pg_user, "when root: the user the embedded PostgreSQL runs as");
}

// Opens the database the options name: the external URL, or the embedded
// cluster (started if needed). `embedded` keeps the cluster object alive.
// `supervised`: the server's own cluster, which lives and dies with it.
std::string open_database(const DatabaseChoice& choice, std::unique_ptr<EmbeddedPostgres>& embedded,
                          bool leave_running_if_found, bool supervised = false) {
  if (!choice.database_url.empty()) return choice.database_url;
  std::optional<std::string> user;
  if (!choice.pg_user.empty()) user = choice.pg_user;
  embedded = std::make_unique<EmbeddedPostgres>(choice.data_dir, user);
  if (supervised) {
    embedded->start_supervised();
    return embedded->url();
  }
  embedded->start();
  if (leave_running_if_found && embedded->was_already_running()) embedded->keep_running();
  return embedded->url();
}

std::pair<std::string, unsigned short> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) throw CLI::ValidationError("--listen", "expected HOST:PORT, got " + listen);
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) throw CLI::ValidationError("--listen", "bad port in " + listen);
  return {host, static_cast<unsigned short>(port)};
}

// An installed kw-server (the .deb: /usr/bin) finds its files in
// ../share/kernelwatch; one in the build tree, where the build put them.
std::string installed_or_built(const std::string& name, const std::string& built) {
  std::error_code ec;
  fs::path installed =
      fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "share" / "kernelwatch" / name;
  if (!ec && fs::exists(installed, ec)) return installed.string();
  return built;
}

std::string admin_token_for_up(const fs::path& data_dir, ConnectionPool& pool) {
  fs::path file = data_dir / "admin-token";
  std::string token;
  if (std::ifstream in(file); in) std::getline(in, token);
  bool valid = !token.empty() &&
               with_transaction(pool, [&](pqxx::work& tx) { return TokenRepository::is_valid(tx, token); });
  if (!valid) {
    token = with_transaction(
        pool, [](pqxx::work& tx) { return TokenRepository::create(tx, "admin (kw up)", Scope::admin); });
    std::ofstream out(file, std::ios::trunc);
    out << token << "\n";
    out.close();
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  }
  return token;
}

int serve(const DatabaseChoice& choice, ServerOptions options, const std::string& listen,
          bool print_admin_token) {
  std::tie(options.http.address, options.http.port) = parse_listen(listen);
  // Signals are taken by sigwait below, never by a worker thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<EmbeddedPostgres> embedded;
  options.database_url = open_database(choice, embedded, false, true);
  App app(options);
  app.start();
  std::string url = "http://" + listen.substr(0, listen.rfind(':')) + ":" + std::to_string(app.port());
  std::cout << "kw-server listening on " << url << " (database: "
            << (embedded ? "embedded in " + fs::absolute(choice.data_dir).string() : std::string("external"))
            << ")" << std::endl;
  if (print_admin_token) {
    std::cout << "dashboard: " << url << "/\n"
              << "admin token: " << admin_token_for_up(choice.data_dir, app.pool()) << std::endl;
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "kw-server: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
            << ": finishing requests in flight, then stopping" << std::endl;
  app.stop();
  app.wait();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kw-server: kernelwatch results server"};
  DatabaseChoice database;
  ServerOptions options;
  std::string listen = "127.0.0.1:8080";
  bool print_admin_token = false;
  add_database_options(cli, database);
  cli.add_option("--listen", listen, "HOST:PORT to serve HTTP on")->capture_default_str();
  cli.add_option("--threads", options.http.threads, "HTTP I/O threads")->capture_default_str();
  cli.add_option("--read-threads", options.http.read_threads, "threads running GET and HEAD requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cli.add_option("--write-threads", options.http.write_threads,
                 "threads running the other requests (ingest, jobs)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  int statement_timeout_ms = static_cast<int>(options.statement_timeout.count());
  cli.add_option("--statement-timeout-ms", statement_timeout_ms,
                 "a database statement running longer is cancelled and its request answered 503")
      ->capture_default_str()
      ->check(CLI::Range(100, 3600 * 1000));
  std::size_t read_cache_mb = options.read_cache_bytes >> 20;
  cli.add_option("--read-cache-mb", read_cache_mb,
                 "memory for series and overview answers, kept until their project is written (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  cli.add_option("--max-connections", options.http.max_connections,
                 "connections served at once; past them a connection gets 503 and Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cli.add_option("--max-connections-per-address", options.http.max_connections_per_address,
                 "connections one client address may hold at once (behind a reverse proxy every client "
                 "shares its address: raise it there)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  std::int64_t first_request_seconds = options.http.first_request_timeout.count();
  cli.add_option("--first-request-timeout", first_request_seconds,
                 "seconds a new connection has to send its first request's header (a kept-alive one has "
                 "the idle timeout)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  std::int64_t idle_seconds = options.http.idle_timeout.count();
  cli.add_option("--idle-timeout", idle_seconds,
                 "seconds a kept-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cli.add_option("--body-limit", options.http.body_limit, "largest request body in bytes")
      ->capture_default_str();
  cli.add_option("--lease-seconds", options.lease_seconds, "job lease length; agents heartbeat within it")
      ->capture_default_str();
  cli.add_option("--max-attempts", options.max_attempts, "claims of a job before it is failed")
      ->capture_default_str();
  cli.add_flag(
      "--read-token-required", options.reads_need_token,
      "GET endpoints need a token even on loopback (off loopback they always do, unless --open-reads)");
  cli.add_flag("--open-reads", options.open_reads,
               "GET endpoints and the dashboard open to anyone, on any address");
  cli.add_flag("--print-admin-token", print_admin_token,
               "print an admin token (kept in DATA_DIR/admin-token)");
  options.dashboard_dir = installed_or_built("dashboard", KW_DEFAULT_DASHBOARD_DIR);
  cli.add_option("--dashboard-dir", options.dashboard_dir, "the built dashboard to serve at /")
      ->capture_default_str();
  options.kw_binary = installed_or_built("kw", KW_DEFAULT_KW_BINARY);
  cli.add_option("--kw-binary", options.kw_binary, "the kw served at /download/kw to CI jobs (empty: none)")
      ->capture_default_str();
  cli.add_option("--public-url", options.notifications.public_url,
                 "base URL of links in commit statuses and webhooks (default: http://LISTEN)");
  cli.add_option("--github-api", options.notifications.github_api, "GitHub REST API base URL")
      ->capture_default_str();
  cli.add_option("--github-token", options.notifications.github_token,
                 "token for commit statuses (or KW_GITHUB_TOKEN); statuses are sent only with one");
  cli.add_option("--gitlab-api", options.notifications.gitlab_api, "GitLab API v4 base URL")
      ->capture_default_str();
  cli.add_option("--gitlab-token", options.notifications.gitlab_token,
                 "token (api scope) for GitLab commit statuses (or KW_GITLAB_TOKEN); sent only with one");
  cli.add_option("--webhook-secret", options.notifications.webhook_secret,
                 "HMAC-SHA256 key for webhook signatures (or KW_WEBHOOK_SECRET)");

  auto* token = cli.add_subcommand("token", "manage API tokens (works while the server runs)");
  token->require_subcommand(1);
  DatabaseChoice token_database;
  std::string scope_text, name, revoke_target;
  auto* create = token->add_subcommand("create", "create a token; prints it on the last line");
  add_database_options(*create, token_database);
  create->add_option("--scope", scope_text, "agent, ci, read or admin")
      ->required()
      ->check(CLI::IsMember({"agent", "ci", "read", "admin"}));
  create->add_option("--name", name, "who the token is for; an agent token binds the agents it registers")
      ->required();
  std::vector<std::string> token_projects;
  create->add_option(
      "--project", token_projects,
      "a project the token may write, acknowledge and read (repeatable; creates it when missing); "
      "none: every project");
  auto* list = token->add_subcommand("list", "list tokens (never their secrets)");
  add_database_options(*list, token_database);
  auto* revoke = token->add_subcommand("revoke", "revoke a token by id or name");
  add_database_options(*revoke, token_database);
  revoke->add_option("ID_OR_NAME", revoke_target)->required();

  auto* project = cli.add_subcommand("project", "manage projects (works while the server runs)");
  project->require_subcommand(1);
  std::string project_name, default_branch = "main";
  auto* project_create = project->add_subcommand("create", "create a project");
  add_database_options(*project_create, token_database);
  project_create->add_option("NAME", project_name, "letters, digits, '-', '_' and '.'")->required();
  project_create->add_option("--default-branch", default_branch, "the branch whose runs are baselines")
      ->capture_default_str();

  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return cli.exit(error);
  }
  options.statement_timeout = std::chrono::milliseconds(statement_timeout_ms);
  options.http.first_request_timeout = std::chrono::seconds(first_request_seconds);
  options.http.idle_timeout = std::chrono::seconds(idle_seconds);
  options.read_cache_bytes = read_cache_mb << 20;

  if (options.notifications.github_token.empty()) {
    if (const char* env = std::getenv("KW_GITHUB_TOKEN")) options.notifications.github_token = env;
  }
  if (options.notifications.gitlab_token.empty()) {
    if (const char* env = std::getenv("KW_GITLAB_TOKEN")) options.notifications.gitlab_token = env;
  }
  if (options.notifications.webhook_secret.empty()) {
    if (const char* env = std::getenv("KW_WEBHOOK_SECRET")) options.notifications.webhook_secret = env;
  }
  try {
    if (!token->parsed() && !project->parsed()) return serve(database, options, listen, print_admin_token);

    std::unique_ptr<EmbeddedPostgres> embedded;
    std::string url = open_database(token_database, embedded, true);
    pqxx::connection connection(url);
    apply_migrations(connection);
    pqxx::work tx(connection);
    if (project_create->parsed()) {
      kw::common::check_project_name(project_name, "NAME");
      if (!RunRepository::create_project(tx, project_name, default_branch)) {
        std::cerr << "project \"" << project_name << "\" exists\n";
        return 1;
      }
      tx.commit();
      std::cout << "created project \"" << project_name << "\"\n";
    } else if (create->parsed()) {
      std::optional<std::vector<std::string>> projects;
      if (!token_projects.empty()) {
        for (const std::string& p : token_projects) kw::common::check_project_name(p, "--project");
        projects = token_projects;
      }
      std::string secret = TokenRepository::create(tx, name, *scope_from(scope_text), projects);
      tx.commit();
      std::cerr << "created " << scope_text << " token \"" << name << "\""
                << (projects ? " for project(s) " + CLI::detail::join(*projects, ", ") : std::string())
                << "; it is shown once:\n";
      std::cout << secret << std::endl;
    } else if (list->parsed()) {
      for (const TokenInfo& info : TokenRepository::list(tx)) {
        std::cout << info.id << "\t" << to_string(info.scope) << "\t" << info.name << "\t"
                  << (info.projects ? CLI::detail::join(*info.projects, ",") : std::string("all projects"))
                  << "\tcreated " << info.created_at
                  << (info.last_used_at.empty() ? "" : "\tlast used " + info.last_used_at)
                  << (info.revoked_at.empty() ? "" : "\trevoked " + info.revoked_at) << "\n";
      }
    } else if (revoke->parsed()) {
      int revoked = TokenRepository::revoke(tx, revoke_target);
      tx.commit();
      if (revoked == 0) {
        std::cerr << "no active token with id or name \"" << revoke_target << "\"\n";
        return 1;
      }
      std::cout << "revoked " << revoked << " token(s)\n";
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "kw-server: " << error.what() << std::endl;
    return 1;
  }
}
