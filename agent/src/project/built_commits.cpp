#include "project/built_commits.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kw/common/hash.hpp"
#include "kw/common/subprocess.hpp"
#include "project/git.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

namespace {

// Beside each tree: "<commit> built" or "<commit> unbuilt". Its mtime is the
// tree's last use.
fs::path state_file(const fs::path& tree) {
  return tree.parent_path() / (tree.filename().string() + ".kw");
}

struct TreeState {
  std::string commit;
  bool built = false;
};

std::optional<TreeState> read_state(const fs::path& tree) {
  std::ifstream in(state_file(tree));
  TreeState state;
  std::string word;
  if (!(in >> state.commit >> word)) return std::nullopt;
  state.built = word == "built";
  return state;
}

void write_state(const fs::path& tree, const std::string& commit, bool built) {
  std::ofstream(state_file(tree), std::ios::trunc) << commit << (built ? " built\n" : " unbuilt\n");
}

// A lock file's descriptor, the file made if missing.
int open_lock_file(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + file.string() + ": " + std::strerror(errno));
  return fd;
}

fs::path use_file(const fs::path& tree) {
  return tree.parent_path() / (tree.filename().string() + ".use");
}

// The descriptor of `tree`'s use lock, locked `how` (LOCK_SH: using it;
// LOCK_EX | LOCK_NB: evicting it); -1 when LOCK_NB finds it held. The file
// goes with the tree it guards: one found unlinked once locked was
// removed while this process waited, and the lock is taken again on the
// tree's next file.
int lock_use(const fs::path& tree, int how) {
  const fs::path file = use_file(tree);
  for (;;) {
    const int fd = open_lock_file(file);
    if (::flock(fd, how) != 0) {
      const int error = errno;
      ::close(fd);
      if (error == EINTR) continue;
      if (error == EWOULDBLOCK) return -1;
      throw std::runtime_error("cannot lock " + file.string() + ": " + std::strerror(error));
    }
    struct stat locked {};
    struct stat named {};
    if (::fstat(fd, &locked) == 0 && ::stat(file.c_str(), &named) == 0 && locked.st_ino == named.st_ino &&
        locked.st_dev == named.st_dev)
      return fd;
    ::close(fd);
  }
}

// A directory name for a project's branch: readable, and distinct for
// branches that read the same once cleaned ("a/b", "a_b").
std::string branch_tree_name(const std::string& project, const std::string& branch) {
  std::string name = "branch-";
  for (char c : (project + "-" + branch).substr(0, 80))
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  char suffix[24];
  std::snprintf(suffix, sizeof(suffix), "-%016llx",
                static_cast<unsigned long long>(common::fnv1a64(project + "\n" + branch)));
  return name + suffix;
}

// The cache's lock, held while a process finds or builds a base in it:
// several `kw run --base` on one host share the cache (a job's shards, one
// on each GPU), and two checking out and building the same commit at once
// trip over each other's worktree. The first builds; the others wait, then
// take its tree. Closing the descriptor releases the lock, also when the
// process dies.
class CacheLock {
 public:
  // Waits for the lock.
  CacheLock(const fs::path& file, const std::atomic<bool>& stop,
            const std::function<void(const std::string&)>& log, const std::string& what) {
    fd_ = open_lock_file(file);
    bool said = false;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error != EWOULDBLOCK && error != EINTR) {
        ::close(fd_);
        throw std::runtime_error("cannot lock " + file.string() + ": " + std::strerror(error));
      }
      if (stop.load()) {
        ::close(fd_);
        throw std::runtime_error("stopped while waiting for " + file.string());
      }
      if (!said)
        log(what + ": another process holds the build cache (" + file.string() + "); waiting for it");
      said = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  // Only if no other process holds it: held() says.
  explicit CacheLock(const fs::path& file) {
    fd_ = open_lock_file(file);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace

std::map<std::string, std::string> compiler_cache_env(const fs::path& ccache_dir, const fs::path& checkout,
                                                      std::string& description) {
  if (ccache_dir.empty()) {
    description = "none";
    return {};
  }
  fs::path ccache;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    fs::path candidate = fs::path(dirs.substr(start, end - start)) / "ccache";
    if (end > start && access(candidate.c_str(), X_OK) == 0) {
      ccache = candidate;
      break;
    }
    start = end + 1;
  }
  if (ccache.empty()) {
    description = "none: ccache is not installed (apt-get install ccache)";
    return {};
  }
  std::map<std::string, std::string> env;
  auto set = [&](const char* name, const std::string& value) {
    if (std::getenv(name) == nullptr) env[name] = value;
  };
  // CMake (3.17+) takes a compiler launcher from these at configure time.
  for (const char* lang : {"C", "CXX", "CUDA"})
    set(("CMAKE_" + std::string(lang) + "_COMPILER_LAUNCHER").c_str(), ccache.string());
  set("CCACHE_DIR", fs::absolute(ccache_dir).string());
  set("CCACHE_BASEDIR", fs::absolute(checkout).string());
  set("CCACHE_NOHASHDIR", "1");  // debug info's working directory would split the cache per worktree
  description = "ccache (" + ccache.string() + ", cache in " + fs::absolute(ccache_dir).string() + ")";
  return env;
}

std::string build_checkout(const RepoConfig& config, const fs::path& checkout, const std::atomic<bool>& stop,
                           std::string& output, double& seconds, const fs::path& ccache_dir,
                           std::string* compiler_cache) {
  seconds = 0;
  std::string description;
  std::map<std::string, std::string> env = compiler_cache_env(ccache_dir, checkout, description);
  for (const auto& [name, value] : config.build_env) env[name] = value;  // the repository's own settings win
  if (compiler_cache) *compiler_cache = description;
  for (const std::string& command : config.build_commands) {
    common::ChildSpec spec = common::shell(command, checkout, config.build_timeout_s - seconds);
    spec.env = env;
    spec.tail_bytes = std::size_t{256} * 1024;  // the resource report is read from it
    common::ChildOutcome outcome = common::run_child(spec, stop);
    seconds += outcome.seconds;
    output += "$ " + command + "\n" + outcome.output_tail;
    if (!outcome.ok()) return "`" + command + "` " + outcome.describe();
  }
  return "";
}

BuiltCommits::BuiltCommits(fs::path dir, std::size_t capacity, fs::path ccache_dir)
    : dir_(std::move(dir)), capacity_(capacity), ccache_dir_(std::move(ccache_dir)) {
  fs::create_directories(dir_);
}

BuiltCommits::~BuiltCommits() {
  let_go();
}

void BuiltCommits::use(const fs::path& tree) {
  if (!in_use_.contains(tree)) in_use_[tree] = lock_use(tree, LOCK_SH);
}

void BuiltCommits::let_go() {
  for (const auto& [_, fd] : in_use_) ::close(fd);
  in_use_.clear();
}

void BuiltCommits::let_go(const fs::path& tree) {
  ::close(in_use_.at(tree));
  in_use_.erase(tree);
}

std::optional<fs::path> BuiltCommits::find_built(const std::string& commit) const {
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_directory()) continue;
    std::optional<TreeState> state = read_state(entry.path());
    if (state && state->built && state->commit == commit) return entry.path();
  }
  return std::nullopt;
}

void BuiltCommits::remove(const fs::path& repo, const fs::path& tree) {
  remove_worktree(repo, tree);
  std::error_code ignored;
  fs::remove(state_file(tree), ignored);
}

void BuiltCommits::evict(const fs::path& repo) {
  // A tree without a state (an older agent's, or one whose checkout was cut
  // short) is the first to go.
  std::vector<std::pair<fs::file_time_type, fs::path>> trees;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (!entry.is_directory() || in_use_.contains(entry.path())) continue;
    std::error_code ec;
    auto when = fs::last_write_time(state_file(entry.path()), ec);
    trees.emplace_back(ec ? fs::file_time_type::min() : when, entry.path());
  }
  std::sort(trees.begin(), trees.end());
  std::size_t kept = trees.size() + in_use_.size();
  for (std::size_t i = 0; i < trees.size() && kept > capacity_; ++i) {
    const int fd = lock_use(trees[i].second, LOCK_EX | LOCK_NB);
    if (fd < 0) continue;  // another process's job uses it
    remove(repo, trees[i].second);
    ::unlink(use_file(trees[i].second).c_str());
    ::close(fd);
    --kept;
  }
  // A use file whose tree is gone: left when a tree was evicted in the
  // instant another process found it.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const fs::path tree = entry.path().parent_path() / entry.path().stem();
    if (entry.path().extension() != ".use" || fs::exists(tree)) continue;
    const int fd = lock_use(tree, LOCK_EX | LOCK_NB);
    if (fd < 0) continue;
    ::unlink(entry.path().c_str());
    ::close(fd);
  }
}

std::optional<fs::path> BuiltCommits::get(const fs::path& repo, const std::string& commit,
                                          const std::atomic<bool>& stop,
                                          const std::function<void(const std::string&)>& log,
                                          std::string& why) {
  std::optional<CacheLock> lock;
  try {
    lock.emplace(dir_ / ".lock", stop, log, "commit " + commit.substr(0, 12));
  } catch (const std::exception& error) {
    why = error.what();
    return std::nullopt;
  }
  if (std::optional<fs::path> tree = find_built(commit)) {
    write_state(*tree, commit, true);
    use(*tree);
    log("commit " + commit.substr(0, 12) + ": built commit from the cache (" + tree->string() + ")");
    return tree;
  }
  fs::path tree = dir_ / commit;
  try {
    add_worktree(repo, tree, commit);
  } catch (const std::exception& error) {
    why = "cannot check out " + commit.substr(0, 12) + ": " + error.what();
    return std::nullopt;
  }
  write_state(tree, commit, false);
  log("commit " + commit.substr(0, 12) + ": building in " + tree.string());
  std::string output;
  double seconds = 0;
  std::string failure;
  try {
    failure =
        build_checkout(load_repo_config(tree / "kernelwatch.json"), tree, stop, output, seconds, ccache_dir_);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  if (!failure.empty()) {
    why = "commit " + commit.substr(0, 12) + " does not build: " + failure;
    remove(repo, tree);
    return std::nullopt;
  }
  log("commit " + commit.substr(0, 12) + ": built in " + std::to_string(static_cast<int>(seconds)) + " s");
  write_state(tree, commit, true);
  use(tree);
  evict(repo);
  return tree;
}

BuildTree BuiltCommits::checkout_for(const fs::path& repo, const std::string& project,
                                     const std::string& branch, const std::string& commit,
                                     const std::function<void(const std::string&)>& log) {
  BuildTree tree;
  std::optional<fs::path> built = find_built(commit);
  if (built) {
    // Held, then read again: another process may have evicted it meanwhile.
    use(*built);
    std::optional<TreeState> state = read_state(*built);
    if (!state || !state->built || state->commit != commit) {
      let_go(*built);
      built.reset();
    }
  }
  if (built) {
    tree = {*built, commit};
    log("building in the tree that built " + commit.substr(0, 12) + " before, " + tree.path.string() +
        " (incremental)");
  } else {
    tree.path = dir_ / branch_tree_name(project, branch);
    use(tree.path);
    std::optional<TreeState> state = read_state(tree.path);
    if (state && fs::exists(tree.path / ".git")) {
      git(tree.path, {"checkout", "-q", "--force", "--detach", commit});
      tree.built_from = state->commit;
      log("building in " + branch + "'s tree " + tree.path.string() + ", incremental on the outputs of " +
          state->commit.substr(0, 12) + (state->built ? "" : " (whose build failed)"));
    } else {
      add_worktree(repo, tree.path, commit);
      log("building in a new tree for " + branch + ", " + tree.path.string());
    }
  }
  write_state(tree.path, commit, false);  // a build cut short leaves no usable entry
  return tree;
}

void BuiltCommits::clean(const BuildTree& tree) {
  git(tree.path, {"clean", "-q", "-ffdx"});
}

void BuiltCommits::finish(const fs::path& repo, const BuildTree& tree, const std::string& commit,
                          bool built) {
  if (built) {
    write_state(tree.path, commit, true);
  } else if (tree.path.filename() == commit) {
    remove(repo, tree.path);
    ::unlink(use_file(tree.path).c_str());
  }
  let_go();
  const CacheLock lock(dir_ / ".lock");
  if (lock.held()) evict(repo);
}

std::filesystem::path user_built_cache(const std::string& cache_dir) {
  if (!cache_dir.empty()) return cache_dir;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/tmp") / ".kw" / "built";
}

}  // namespace kw::agent
