// A private PostgreSQL cluster inside kw-server's data directory: created with
// initdb the first time, started with pg_ctl, listening on 127.0.0.1 only with
// a password only this data directory holds. Also the test fixture's database.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kw::server {

class EmbeddedPostgres {
 public:
  // `data_dir` is kw-server's data directory; the cluster lives in
  // data_dir/postgres. When running as root, the PostgreSQL tools run as
  // `run_as` (default: the "postgres" user, which Debian's package creates).
  explicit EmbeddedPostgres(const std::filesystem::path& data_dir, std::optional<std::string> run_as = {});
  ~EmbeddedPostgres();
  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // Creates the cluster if needed and makes sure a postmaster is running on
  // it: reuses one that is already running (kw-server was killed and left it),
  // clears a stale lock file, and lets PostgreSQL's crash recovery run.
  void start();
  // kw-server's way: like start(), but the postmaster is a child of this
  // process, watched by a thread. When it dies it is started again on the
  // same port after a pause (1 s, doubling to 30 s; back to 1 s after a
  // minute up), and it gets SIGINT (fast shutdown) when this process ends,
  // however that happens (PR_SET_PDEATHSIG), so no postmaster outlives a
  // crashed or killed kw-server. One found running is adopted and watched.
  void start_supervised();
  // Times the supervisor has started the postmaster again.
  int restarts() const { return restarts_; }
  // Fast shutdown (pg_ctl stop -m fast). Only if this object started or
  // adopted the postmaster and `keep_running` was not asked for.
  void stop();
  // Leave the postmaster running when this object goes away (the `token`
  // command on a data dir whose server is up).
  void keep_running() { keep_running_ = true; }
  bool was_already_running() const { return was_already_running_; }

  // Makes this data directory's cluster a streaming replica of `primary`
  // (running, and not yet holding a cluster here): a base backup with
  // standby.signal and primary_conninfo (pg_basebackup -R). start() then
  // runs it as a hot standby on a port of its own, replaying the primary's
  // WAL as it comes.
  void make_standby_of(const EmbeddedPostgres& primary);

  // Creates the database if missing.
  void ensure_database(const std::string& name) const;
  void drop_database(const std::string& name) const;
  // `sql` on `database` outside a transaction (CREATE, ALTER and DROP DATABASE).
  void psql(const std::string& database, const std::string& sql) const;
  std::string url(const std::string& database = "kernelwatch") const;
  int port() const { return port_; }

  static std::filesystem::path find_bin_dir();

 private:
  void prepare_cluster();
  // Creates or opens the cluster; true when a postmaster already runs on it.
  bool prepare_and_adopt();
  void init_cluster();
  // Run as root: the cluster folder (and `also`) to the user PostgreSQL runs as.
  void hand_to_run_as_user(const std::filesystem::path& also = {});
  void supervise();
  long running_pid() const;
  bool postmaster_running();
  int read_running_port() const;
  std::string run_tool(const std::string& tool, const std::vector<std::string>& args, bool check = true);

  std::filesystem::path data_dir_;
  std::filesystem::path cluster_dir_;
  std::filesystem::path bin_dir_;
  std::optional<std::string> run_as_;
  std::string password_;
  int port_ = 0;
  bool running_ = false;
  bool keep_running_ = false;
  bool was_already_running_ = false;

  bool supervised_ = false;
  std::thread supervisor_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool supervisor_done_ = false;
  std::atomic<int> restarts_{0};
  std::string last_exit_;  // how the postmaster last ended, with its output's tail
};

}  // namespace kw::server
