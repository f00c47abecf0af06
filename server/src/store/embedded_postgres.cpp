#include "store/embedded_postgres.hpp"

#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <pqxx/pqxx>

#include "kw/common/subprocess.hpp"
#include "log_line.hpp"

namespace kw::server {

namespace fs = std::filesystem;

namespace {

std::string random_hex(std::size_t bytes) {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!urandom.read(raw.data(), static_cast<std::streamsize>(bytes))) {
    throw std::runtime_error("cannot read /dev/urandom");
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed while choosing a PostgreSQL port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    throw std::runtime_error("cannot find a free loopback port for PostgreSQL");
  }
  int port = ntohs(address.sin_port);
  close(fd);
  return port;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_private_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  out << text;
  out.close();
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
}

// PostgreSQL refuses to start while backends of a postmaster killed with
// SIGKILL still hold its shared memory: they exit once they notice their
// postmaster is gone, and until then every start ends with this.
bool orphans_hold_memory(const std::string& exit_text) {
  return exit_text.find("pre-existing shared memory block") != std::string::npos;
}

}  // namespace

fs::path EmbeddedPostgres::find_bin_dir() {
  if (const char* env = std::getenv("KW_PG_BINDIR"); env != nullptr && *env != '\0') return env;
  // Prefer the newest /usr/lib/postgresql/<version>/bin (Debian/Ubuntu), then pg_config.
  std::vector<std::pair<int, fs::path>> candidates;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    fs::path bin = entry.path() / "bin";
    if (fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      int version = static_cast<int>(std::strtol(entry.path().filename().c_str(), nullptr, 10));
      candidates.emplace_back(version, bin);
    }
  }
  if (!candidates.empty()) {
    return std::max_element(candidates.begin(), candidates.end())->second;
  }
  common::ChildSpec spec;
  spec.argv = {"pg_config", "--bindir"};
  spec.timeout_s = 30;
  common::ChildOutcome pg_config = common::run_child(spec);
  if (pg_config.ok()) {
    std::string dir = pg_config.output_tail.substr(0, pg_config.output_tail.find('\n'));
    if (fs::exists(fs::path(dir) / "initdb")) return dir;
  }
  throw std::runtime_error(
      "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin or pg_config "
      "--bindir; install the `postgresql` package or pass --database-url");
}

EmbeddedPostgres::EmbeddedPostgres(const fs::path& data_dir, std::optional<std::string> run_as)
    : data_dir_(fs::absolute(data_dir)),
      cluster_dir_(data_dir_ / "postgres"),
      bin_dir_(find_bin_dir()),
      run_as_(std::move(run_as)) {
  if (geteuid() == 0 && !run_as_) run_as_ = "postgres";
  if (geteuid() != 0) run_as_.reset();
}

EmbeddedPostgres::~EmbeddedPostgres() {
  try {
    if (!keep_running_ || supervised_) stop();
  } catch (const std::exception& error) {
    LogLine() << "kw-server: stopping PostgreSQL: " << error.what() << "\n";
  }
}

std::string EmbeddedPostgres::run_tool(const std::string& tool, const std::vector<std::string>& args,
                                       bool check) {
  common::ChildSpec spec;
  spec.argv = {(bin_dir_ / tool).string()};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.timeout_s = 300;
  spec.tail_bytes = std::size_t{64} * 1024;
  spec.run_as = run_as_.value_or("");
  common::ChildOutcome result = common::run_child(spec);
  if (check && !result.ok()) {
    // Run as root, PostgreSQL runs as its own user, which must reach the
    // data directory: a home folder closed to others stops it first.
    const std::string why =
        run_as_ && result.output_tail.find("Permission denied") != std::string::npos
            ? " (PostgreSQL runs as user " + *run_as_ + ", who cannot reach " + data_dir_.string() +
                  ": give the folders above it o+x, or choose a data directory it can reach, e.g. "
                  "--data-dir /var/tmp/kw or KW_DATA_DIR for kw up)"
            : "";
    throw std::runtime_error(tool + " failed (" + result.describe() + ")" + why + ": " + result.output_tail);
  }
  return result.output_tail;
}

void EmbeddedPostgres::hand_to_run_as_user(const fs::path& also) {
  if (!run_as_) return;
  passwd* entry = getpwnam(run_as_->c_str());
  if (entry == nullptr) {
    throw std::runtime_error("running as root, PostgreSQL needs an unprivileged user; no user \"" + *run_as_ +
                             "\" exists (install the postgresql package or pass --pg-user)");
  }
  // The tools run as that user and must reach the cluster through data_dir.
  fs::permissions(data_dir_, fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
  if (chown(cluster_dir_.c_str(), entry->pw_uid, entry->pw_gid) != 0 ||
      (!also.empty() && chown(also.c_str(), entry->pw_uid, entry->pw_gid) != 0)) {
    throw std::runtime_error("cannot hand " + cluster_dir_.string() + " to user " + *run_as_);
  }
}

void EmbeddedPostgres::init_cluster() {
  fs::create_directories(data_dir_);
  password_ = random_hex(24);
  write_private_file(data_dir_ / "postgres.password", password_);
  fs::create_directories(cluster_dir_);
  fs::permissions(cluster_dir_, fs::perms::owner_all, fs::perm_options::replace);
  fs::path pwfile = data_dir_ / "initdb.pw";
  write_private_file(pwfile, password_ + "\n");
  hand_to_run_as_user(pwfile);
  LogLine() << "kw-server: creating PostgreSQL cluster in " << cluster_dir_ << "\n";
  try {
    run_tool("initdb", {"-D", cluster_dir_.string(), "-U", "kw", "--auth=scram-sha-256",
                        "--pwfile=" + pwfile.string(), "-E", "UTF8", "--locale=C"});
  } catch (...) {
    fs::remove(pwfile);
    throw;
  }
  fs::remove(pwfile);
  std::ofstream conf(cluster_dir_ / "postgresql.conf", std::ios::app);
  conf << "\n# kernelwatch: loopback only, no Unix socket\n"
       << "listen_addresses = '127.0.0.1'\n"
       << "unix_socket_directories = ''\n"
       << "max_connections = 200\n"
       << "shared_buffers = 128MB\n";
}

void EmbeddedPostgres::make_standby_of(const EmbeddedPostgres& primary) {
  if (fs::exists(cluster_dir_ / "PG_VERSION"))
    throw std::runtime_error(cluster_dir_.string() +
                             " holds a cluster already; a standby needs an empty one");
  fs::create_directories(data_dir_);
  password_ = primary.password_;  // the roles come with the backup
  write_private_file(data_dir_ / "postgres.password", password_);
  fs::create_directories(cluster_dir_);
  fs::permissions(cluster_dir_, fs::perms::owner_all, fs::perm_options::replace);
  hand_to_run_as_user();
  LogLine() << "kw-server: copying the cluster on port " << primary.port_ << " into " << cluster_dir_
            << " as its streaming standby\n";
  common::ChildSpec spec;
  spec.argv = {(bin_dir_ / "pg_basebackup").string(),
               "-h",
               "127.0.0.1",
               "-p",
               std::to_string(primary.port_),
               "-U",
               "kw",
               "-D",
               cluster_dir_.string(),
               "-X",
               "stream",
               "-R",
               "--checkpoint=fast"};
  spec.env["PGPASSWORD"] = password_;  // not on the command line, where ps shows it
  spec.timeout_s = 300;
  spec.tail_bytes = std::size_t{16} * 1024;
  spec.run_as = run_as_.value_or("");
  const common::ChildOutcome result = common::run_child(spec);
  if (!result.ok())
    throw std::runtime_error("pg_basebackup failed (" + result.describe() + "): " + result.output_tail);
}

bool EmbeddedPostgres::postmaster_running() {
  fs::path pid_file = cluster_dir_ / "postmaster.pid";
  if (!fs::exists(pid_file)) return false;
  std::ifstream in(pid_file);
  long pid = 0;
  in >> pid;
  if (pid > 0 && kill(static_cast<pid_t>(pid), 0) == 0) {
    // A live process with that PID; make sure it is a postgres and not a
    // recycled PID before trusting it.
    std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find("postgres") != std::string::npos) return true;
  } else if (pid > 0 && errno == EPERM) {
    return true;  // alive, owned by the postgres user
  }
  LogLine() << "kw-server: removing stale " << pid_file << " (postmaster " << pid << " is gone)\n";
  fs::remove(pid_file);
  return false;
}

int EmbeddedPostgres::read_running_port() const {
  // postmaster.pid line 4 is the port.
  std::ifstream in(cluster_dir_ / "postmaster.pid");
  std::string line;
  for (int i = 0; i < 4 && std::getline(in, line); ++i) {
  }
  return static_cast<int>(std::strtol(line.c_str(), nullptr, 10));
}

void EmbeddedPostgres::prepare_cluster() {
  if (!fs::exists(cluster_dir_ / "PG_VERSION")) {
    if (fs::exists(cluster_dir_) && !fs::is_empty(cluster_dir_)) {
      throw std::runtime_error(cluster_dir_.string() +
                               " exists but is not a PostgreSQL cluster; move it away");
    }
    init_cluster();
  } else {
    password_ = read_file(data_dir_ / "postgres.password");
    if (password_.empty()) throw std::runtime_error("missing " + (data_dir_ / "postgres.password").string());
  }
}

bool EmbeddedPostgres::prepare_and_adopt() {
  prepare_cluster();
  if (!postmaster_running()) return false;
  port_ = read_running_port();
  was_already_running_ = true;
  LogLine() << "kw-server: reusing the PostgreSQL already running on " << cluster_dir_ << " (port " << port_
            << ")\n";
  return true;
}

void EmbeddedPostgres::start_supervised() {
  if (!prepare_and_adopt()) port_ = free_loopback_port();
  supervised_ = true;
  running_ = true;
  supervisor_ = std::thread([this] { supervise(); });
  // Ready once it takes connections; a postmaster that exits first failed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    try {
      pqxx::connection probe(url("postgres"));
      break;
    } catch (const std::exception& error) {
      std::string why, last_exit;
      {
        std::lock_guard lock(mutex_);
        last_exit = last_exit_;
        // The supervisor starts it again until the backends that a killed
        // postmaster left behind have gone; any other exit is a failure now.
        if (restarts_ > 0 && !orphans_hold_memory(last_exit_))
          why = "PostgreSQL exited while starting: " + last_exit_;
      }
      if (why.empty() && std::chrono::steady_clock::now() > deadline)
        why = std::string("PostgreSQL took no connection within 120 s: ") + error.what() +
              (last_exit.empty() ? "" : "; it last exited: " + last_exit);
      if (!why.empty()) {
        stop();
        throw std::runtime_error(why);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ensure_database("kernelwatch");
}

long EmbeddedPostgres::running_pid() const {
  std::ifstream in(cluster_dir_ / "postmaster.pid");
  long pid = 0;
  in >> pid;
  return pid;
}

void EmbeddedPostgres::supervise() {
  std::chrono::seconds pause(1);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    if (postmaster_running()) {  // adopted: watched until it is gone
      lock.lock();
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      continue;
    }
    common::ChildSpec spec;
    spec.argv = {(bin_dir_ / "postgres").string(), "-D", cluster_dir_.string(), "-p", std::to_string(port_)};
    spec.run_as = run_as_.value_or("");
    spec.parent_death_signal = SIGINT;
    spec.timeout_s = 1e9;  // it runs until stopped
    spec.tail_bytes = std::size_t{16} * 1024;
    const fs::path log_path = cluster_dir_ / "server.log";
    std::ofstream log(log_path, std::ios::app);
    if (run_as_) {  // pg_ctl, run as that user, writes the same file
      if (passwd* entry = getpwnam(run_as_->c_str());
          entry == nullptr || chown(log_path.c_str(), entry->pw_uid, entry->pw_gid) != 0)
        LogLine() << "kw-server: cannot hand " << log_path << " to user " << *run_as_ << "\n";
    }
    spec.on_line = [&log](const std::string& line) { log << line << std::endl; };
    const auto started = std::chrono::steady_clock::now();
    std::string ended;
    try {
      common::ChildOutcome outcome = common::run_child(spec);
      ended = outcome.describe() + ": " +
              outcome.output_tail.substr(outcome.output_tail.size() -
                                         std::min<std::size_t>(outcome.output_tail.size(), 2000));
    } catch (const std::exception& error) {
      ended = error.what();
    }
    lock.lock();
    last_exit_ = ended;
    if (stopping_) break;
    ++restarts_;
    if (std::chrono::steady_clock::now() - started > std::chrono::minutes(1)) pause = std::chrono::seconds(1);
    LogLine() << "kw-server: PostgreSQL " << ended.substr(0, ended.find('\n')) << "; starting it again in "
              << pause.count() << " s" << std::endl;
    wake_.wait_for(lock, pause, [this] { return stopping_; });
    // Orphaned backends go within a second or two: no backoff for them.
    if (!orphans_hold_memory(ended)) pause = std::min(pause * 2, std::chrono::seconds(30));
  }
  supervisor_done_ = true;
  wake_.notify_all();
}

void EmbeddedPostgres::start() {
  if (!prepare_and_adopt()) {
    port_ = free_loopback_port();
    run_tool("pg_ctl", {"-D", cluster_dir_.string(), "-l", (cluster_dir_ / "server.log").string(), "-w", "-t",
                        "120", "-o", "-p " + std::to_string(port_), "start"});
  }
  running_ = true;
  ensure_database("kernelwatch");
}

void EmbeddedPostgres::stop() {
  if (supervised_) {
    if (!running_) return;
    running_ = false;
    std::unique_lock lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
    // Fast shutdown of whichever postmaster runs, again until the supervisor
    // is done: one it was starting just now gets it too.
    while (!supervisor_done_) {
      if (long pid = running_pid(); pid > 0) kill(static_cast<pid_t>(pid), SIGINT);
      wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return supervisor_done_; });
    }
    lock.unlock();
    supervisor_.join();
    // An adopted postmaster is no child of ours: wait for it to go.
    for (int i = 0; i < 600 && postmaster_running(); ++i) {
      if (long pid = running_pid(); pid > 0) kill(static_cast<pid_t>(pid), SIGINT);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return;
  }
  if (!running_) return;
  running_ = false;
  run_tool("pg_ctl", {"-D", cluster_dir_.string(), "-m", "fast", "-w", "-t", "60", "stop"}, false);
}

std::string EmbeddedPostgres::url(const std::string& database) const {
  return "postgresql://kw:" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" + database +
         "?connect_timeout=10";
}

void EmbeddedPostgres::psql(const std::string& database, const std::string& sql) const {
  pqxx::connection connection(url(database));
  pqxx::nontransaction tx(connection);
  tx.exec(sql);
}

void EmbeddedPostgres::ensure_database(const std::string& name) const {
  pqxx::connection connection(url("postgres"));
  pqxx::nontransaction tx(connection);
  if (tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", name).empty()) {
    tx.exec("CREATE DATABASE " + tx.quote_name(name));
  }
}

void EmbeddedPostgres::drop_database(const std::string& name) const {
  psql("postgres",
       "DROP DATABASE IF EXISTS " + pqxx::connection(url("postgres")).quote_name(name) + " WITH (FORCE)");
}

}  // namespace kw::server
