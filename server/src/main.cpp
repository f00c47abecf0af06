// kw-server: the kernelwatch HTTP API over PostgreSQL.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "app.hpp"
#include "kw/common/run_report.hpp"
#include "log_line.hpp"
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
  LogLine() << "kw-server: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
            << ": finishing requests in flight, then stopping" << std::endl;
  app.stop();
  app.wait();
  return 0;
}

// kw-server's own flags, and the ones read into ServerOptions after parsing.
struct ServeFlags {
  ServerOptions options;
  std::string listen = "127.0.0.1:8080";
  bool print_admin_token = false;
  int statement_timeout_ms = static_cast<int>(options.statement_timeout.count());
  std::size_t read_cache_mb = options.read_cache_bytes >> 20;
  std::int64_t first_request_seconds = options.http.first_request_timeout.count();
  std::int64_t idle_seconds = options.http.idle_timeout.count();
};

// Listening, threads, timeouts and limits.
void add_http_options(CLI::App& cli, ServeFlags& flags) {
  cli.add_option("--listen", flags.listen, "HOST:PORT to serve HTTP on")->capture_default_str();
  cli.add_option("--threads", flags.options.http.threads, "HTTP I/O threads")->capture_default_str();
  cli.add_option("--read-threads", flags.options.http.read_threads, "threads running GET and HEAD requests")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cli.add_option("--write-threads", flags.options.http.write_threads,
                 "threads running writes with large bodies (run reports, profiles)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cli.add_option("--small-write-threads", flags.options.http.small_write_threads,
                 "threads running the other writes (claims, heartbeats, stages, jobs)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cli.add_option("--statement-timeout-ms", flags.statement_timeout_ms,
                 "a database statement running longer is cancelled and its request answered 503")
      ->capture_default_str()
      ->check(CLI::Range(100, 3600 * 1000));
  cli.add_option("--read-cache-mb", flags.read_cache_mb,
                 "memory for series and overview answers, kept until their project is written (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
}

// What one connection and one request may take.
void add_limit_options(CLI::App& cli, ServeFlags& flags) {
  cli.add_option("--max-connections", flags.options.http.max_connections,
                 "connections served at once; past them a connection gets 503 and Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cli.add_option("--max-connections-per-address", flags.options.http.max_connections_per_address,
                 "connections one client address may hold at once (behind a reverse proxy every client "
                 "shares its address: raise it there)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  cli.add_option("--first-request-timeout", flags.first_request_seconds,
                 "seconds a new connection has to send its first request's header (a kept-alive one has "
                 "the idle timeout)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cli.add_option("--idle-timeout", flags.idle_seconds,
                 "seconds a kept-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cli.add_option("--body-limit", flags.options.http.body_limit, "largest request body in bytes")
      ->capture_default_str();
  cli.add_option("--decoded-body-limit", flags.options.http.decoded_body_limit,
                 "largest size a gzip request body may decompress to, in bytes")
      ->capture_default_str();
  cli.add_option("--body-memory", flags.options.http.body_memory,
                 "bytes that the request bodies being inflated and parsed may hold in all; past it, 503")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{16} << 20, std::size_t{1} << 40));
}

// What report uploads not completed may hold (store/upload_repository.hpp).
void add_upload_options(CLI::App& cli, ServeFlags& flags) {
  UploadQuota& uploads = flags.options.uploads;
  cli.add_option("--uploads-per-token", uploads.uploads_per_token,
                 "report uploads one token may have begun and not completed; past it, 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cli.add_option("--upload-bytes-per-token", uploads.bytes_per_token,
                 "bytes (as sent) that one token's uploads not completed may hold; past it, 507")
      ->capture_default_str();
  cli.add_option("--uploads-per-project", uploads.uploads_per_project,
                 "report uploads not completed that one project may have; past it, 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cli.add_option("--upload-bytes-per-project", uploads.bytes_per_project,
                 "bytes (as sent) that one project's uploads not completed may hold; past it, 507")
      ->capture_default_str();
  cli.add_option("--upload-expiry-minutes", uploads.incomplete_minutes,
                 "minutes an upload may wait for its next part or its completion before it is removed")
      ->capture_default_str()
      ->check(CLI::Range(1, 24 * 60));
}

// Jobs, access, the files served, and where commit statuses and webhooks go.
void add_service_options(CLI::App& cli, ServeFlags& flags) {
  cli.add_option("--lease-seconds", flags.options.lease_seconds,
                 "job lease length; agents heartbeat within it")
      ->capture_default_str();
  cli.add_option("--max-attempts", flags.options.max_attempts, "claims of a job before it is failed")
      ->capture_default_str();
  cli.add_flag(
      "--read-token-required", flags.options.reads_need_token,
      "GET endpoints need a token even on loopback (off loopback they always do, unless --open-reads)");
  cli.add_flag("--open-reads", flags.options.open_reads,
               "GET endpoints and the dashboard open to anyone, on any address");
  cli.add_flag("--print-admin-token", flags.print_admin_token,
               "print an admin token (kept in DATA_DIR/admin-token)");
  flags.options.dashboard_dir = installed_or_built("dashboard", KW_DEFAULT_DASHBOARD_DIR);
  cli.add_option("--dashboard-dir", flags.options.dashboard_dir, "the built dashboard to serve at /")
      ->capture_default_str();
  flags.options.kw_binary = installed_or_built("kw", KW_DEFAULT_KW_BINARY);
  cli.add_option("--kw-binary", flags.options.kw_binary,
                 "the kw served at /download/kw to CI jobs (empty: none)")
      ->capture_default_str();
  cli.add_option("--public-url", flags.options.notifications.public_url,
                 "base URL of links in commit statuses and webhooks (default: http://LISTEN)");
  cli.add_option("--github-api", flags.options.notifications.github_api, "GitHub REST API base URL")
      ->capture_default_str();
  cli.add_option("--github-token", flags.options.notifications.github_token,
                 "token for commit statuses (or KW_GITHUB_TOKEN); statuses are sent only with one");
  cli.add_option("--gitlab-api", flags.options.notifications.gitlab_api, "GitLab API v4 base URL")
      ->capture_default_str();
  cli.add_option("--gitlab-token", flags.options.notifications.gitlab_token,
                 "token (api scope) for GitLab commit statuses (or KW_GITLAB_TOKEN); sent only with one");
  cli.add_option("--keep-samples-days", flags.options.retention.days,
                 "raw samples older than this are dropped by the month, except those of each case's newest "
                 "judged runs (0: kept for ever)")
      ->capture_default_str()
      ->check(CLI::Range(0, 36500));
  cli.add_option(
         "--keep-samples-runs", flags.options.retention.runs,
         "the newest judged runs of each case, branch and GPU model whose samples are kept however old")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cli.add_option(
      "--read-database-url", flags.options.read_database_url,
      "a streaming replica of the database (postgresql://...): the history reads and the dashboard's "
      "go there, except where it has not yet replayed a write this server has made or heard of");
  cli.add_flag("--allow-private-webhooks", flags.options.notifications.allow_private_webhooks,
               "let projects' webhooks reach loopback, private and link-local addresses (an on-premises "
               "receiver); off, such a webhook_url is refused and such addresses are never connected to");
  cli.add_option("--webhook-secret", flags.options.notifications.webhook_secret,
                 "HMAC-SHA256 key for webhook signatures (or KW_WEBHOOK_SECRET)");
}

// What the flags give as numbers becomes ServerOptions' durations; tokens
// not given as flags come from the environment.
void finish_serve_flags(ServeFlags& flags) {
  flags.options.statement_timeout = std::chrono::milliseconds(flags.statement_timeout_ms);
  flags.options.http.first_request_timeout = std::chrono::seconds(flags.first_request_seconds);
  flags.options.http.idle_timeout = std::chrono::seconds(flags.idle_seconds);
  flags.options.read_cache_bytes = flags.read_cache_mb << 20;

  if (flags.options.notifications.github_token.empty()) {
    if (const char* env = std::getenv("KW_GITHUB_TOKEN")) flags.options.notifications.github_token = env;
  }
  if (flags.options.notifications.gitlab_token.empty()) {
    if (const char* env = std::getenv("KW_GITLAB_TOKEN")) flags.options.notifications.gitlab_token = env;
  }
  if (flags.options.notifications.webhook_secret.empty()) {
    if (const char* env = std::getenv("KW_WEBHOOK_SECRET")) flags.options.notifications.webhook_secret = env;
  }
}

// kw-server token ... and kw-server project ...: administration on the
// database, working while the server runs.
struct AdminCommands {
  CLI::App* token = nullptr;
  CLI::App* create = nullptr;
  CLI::App* list = nullptr;
  CLI::App* revoke = nullptr;
  CLI::App* project = nullptr;
  CLI::App* project_create = nullptr;
  DatabaseChoice database;
  std::string scope_text, name, revoke_target;
  std::vector<std::string> token_projects;
  std::string project_name, default_branch = "main";

  bool parsed() const { return token->parsed() || project->parsed(); }
};

void add_admin_commands(CLI::App& cli, AdminCommands& admin) {
  admin.token = cli.add_subcommand("token", "manage API tokens (works while the server runs)");
  admin.token->require_subcommand(1);
  admin.create = admin.token->add_subcommand("create", "create a token; prints it on the last line");
  add_database_options(*admin.create, admin.database);
  admin.create->add_option("--scope", admin.scope_text, "agent, ci, read or admin")
      ->required()
      ->check(CLI::IsMember({"agent", "ci", "read", "admin"}));
  admin.create
      ->add_option("--name", admin.name, "who the token is for; an agent token binds the agents it registers")
      ->required();
  admin.create->add_option(
      "--project", admin.token_projects,
      "a project the token may write, acknowledge and read (repeatable; creates it when missing); "
      "none: every project");
  admin.list = admin.token->add_subcommand("list", "list tokens (never their secrets)");
  add_database_options(*admin.list, admin.database);
  admin.revoke = admin.token->add_subcommand("revoke", "revoke a token by id or name");
  add_database_options(*admin.revoke, admin.database);
  admin.revoke->add_option("ID_OR_NAME", admin.revoke_target)->required();

  admin.project = cli.add_subcommand("project", "manage projects (works while the server runs)");
  admin.project->require_subcommand(1);
  admin.project_create = admin.project->add_subcommand("create", "create a project");
  add_database_options(*admin.project_create, admin.database);
  admin.project_create->add_option("NAME", admin.project_name, "letters, digits, '-', '_' and '.'")
      ->required();
  admin.project_create
      ->add_option("--default-branch", admin.default_branch, "the branch whose runs are baselines")
      ->capture_default_str();
}

void list_tokens(pqxx::work& tx) {
  for (const TokenInfo& info : TokenRepository::list(tx)) {
    std::cout << info.id << "\t" << to_string(info.scope) << "\t" << info.name << "\t"
              << (info.projects ? CLI::detail::join(*info.projects, ",") : std::string("all projects"))
              << "\tcreated " << info.created_at
              << (info.last_used_at.empty() ? "" : "\tlast used " + info.last_used_at)
              << (info.revoked_at.empty() ? "" : "\trevoked " + info.revoked_at) << "\n";
  }
}

int run_admin(const AdminCommands& admin) {
  std::unique_ptr<EmbeddedPostgres> embedded;
  std::string url = open_database(admin.database, embedded, true);
  pqxx::connection connection(url);
  apply_migrations(connection);
  pqxx::work tx(connection);
  if (admin.project_create->parsed()) {
    kw::common::check_project_name(admin.project_name, "NAME");
    if (!RunRepository::create_project(tx, admin.project_name, admin.default_branch)) {
      LogLine() << "project \"" << admin.project_name << "\" exists\n";
      return 1;
    }
    tx.commit();
    std::cout << "created project \"" << admin.project_name << "\"\n";
  } else if (admin.create->parsed()) {
    std::optional<std::vector<std::string>> projects;
    if (!admin.token_projects.empty()) {
      for (const std::string& p : admin.token_projects) kw::common::check_project_name(p, "--project");
      projects = admin.token_projects;
    }
    std::string secret = TokenRepository::create(tx, admin.name, *scope_from(admin.scope_text), projects);
    tx.commit();
    LogLine() << "created " << admin.scope_text << " token \"" << admin.name << "\""
              << (projects ? " for project(s) " + CLI::detail::join(*projects, ", ") : std::string())
              << "; it is shown once:\n";
    std::cout << secret << std::endl;
  } else if (admin.list->parsed()) {
    list_tokens(tx);
  } else if (admin.revoke->parsed()) {
    int revoked = TokenRepository::revoke(tx, admin.revoke_target);
    tx.commit();
    if (revoked == 0) {
      LogLine() << "no active token with id or name \"" << admin.revoke_target << "\"\n";
      return 1;
    }
    std::cout << "revoked " << revoked << " token(s)\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kw-server: kernelwatch results server"};
  DatabaseChoice database;
  ServeFlags flags;
  add_database_options(cli, database);
  add_http_options(cli, flags);
  add_limit_options(cli, flags);
  add_upload_options(cli, flags);
  add_service_options(cli, flags);
  AdminCommands admin;
  add_admin_commands(cli, admin);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return cli.exit(error);
  }
  finish_serve_flags(flags);
  try {
    if (!admin.parsed()) return serve(database, flags.options, flags.listen, flags.print_admin_token);
    return run_admin(admin);
  } catch (const std::exception& error) {
    LogLine() << "kw-server: " << error.what() << std::endl;
    return 1;
  }
}
