#include "built_commits.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "git.hpp"
#include "kw/common/subprocess.hpp"
#include "repo_config.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

namespace {

// Present only once the build succeeded: a half-built entry is never used.
constexpr const char* kBuiltMarker = ".kw-built";

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
    spec.tail_bytes = 256 * 1024;  // the resource report is read from it
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

void BuiltCommits::mark_used(const fs::path& entry) {
  std::ofstream(entry / kBuiltMarker, std::ios::trunc) << "built\n";  // its mtime orders the LRU
}

void BuiltCommits::evict(const fs::path& repo) {
  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    std::error_code ec;
    auto when = fs::last_write_time(entry.path() / kBuiltMarker, ec);
    if (!ec) entries.emplace_back(when, entry.path());
  }
  std::sort(entries.begin(), entries.end());
  for (std::size_t i = 0; i + capacity_ < entries.size(); ++i) remove_worktree(repo, entries[i].second);
}

std::optional<fs::path> BuiltCommits::get(const fs::path& repo, const std::string& commit,
                                          const std::atomic<bool>& stop,
                                          const std::function<void(const std::string&)>& log,
                                          std::string& why) {
  fs::path entry = dir_ / commit;
  if (fs::exists(entry / kBuiltMarker)) {
    mark_used(entry);
    log("base " + commit.substr(0, 12) + ": built commit from the cache (" + entry.string() + ")");
    return entry;
  }
  try {
    add_worktree(repo, entry, commit);
  } catch (const std::exception& error) {
    why = "cannot check out base " + commit.substr(0, 12) + ": " + error.what();
    return std::nullopt;
  }
  log("base " + commit.substr(0, 12) + ": building in " + entry.string());
  std::string output;
  double seconds = 0;
  std::string failure;
  try {
    failure = build_checkout(load_repo_config(entry / "kernelwatch.json"), entry, stop, output, seconds,
                             ccache_dir_);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  if (!failure.empty()) {
    why = "base " + commit.substr(0, 12) + " does not build: " + failure;
    remove_worktree(repo, entry);
    return std::nullopt;
  }
  log("base " + commit.substr(0, 12) + ": built in " + std::to_string(static_cast<int>(seconds)) + " s");
  mark_used(entry);
  evict(repo);
  return entry;
}

fs::path BuiltCommits::checkout_for(const fs::path& repo, const std::string& commit,
                                    const std::function<void(const std::string&)>& log) {
  fs::path entry = dir_ / commit;
  if (fs::exists(entry / ".git")) {
    log("building in the built commit's tree " + entry.string() + " (incremental)");
  } else {
    if (fs::exists(entry)) remove_worktree(repo, entry);
    add_worktree(repo, entry, commit);
  }
  std::error_code ignored;
  fs::remove(entry / kBuiltMarker, ignored);  // a build cut short leaves no usable entry
  return entry;
}

void BuiltCommits::finish(const fs::path& repo, const std::string& commit, bool built) {
  fs::path entry = dir_ / commit;
  if (!built) {
    remove_worktree(repo, entry);
    return;
  }
  mark_used(entry);
  evict(repo);
}

}  // namespace kw::agent
