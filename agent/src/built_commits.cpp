#include "built_commits.hpp"

#include <algorithm>
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

std::string build_checkout(const RepoConfig& config, const fs::path& checkout, const std::atomic<bool>& stop,
                           std::string& output, double& seconds) {
  seconds = 0;
  for (const std::string& command : config.build_commands) {
    common::ChildSpec spec = common::shell(command, checkout, config.build_timeout_s - seconds);
    spec.env = config.build_env;
    spec.tail_bytes = 256 * 1024;  // the resource report is read from it
    common::ChildOutcome outcome = common::run_child(spec, stop);
    seconds += outcome.seconds;
    output += "$ " + command + "\n" + outcome.output_tail;
    if (!outcome.ok()) return "`" + command + "` " + outcome.describe();
  }
  return "";
}

BuiltCommits::BuiltCommits(fs::path dir, std::size_t capacity) : dir_(std::move(dir)), capacity_(capacity) {
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
    failure = build_checkout(load_repo_config(entry / "kernelwatch.json"), entry, stop, output, seconds);
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

bool BuiltCommits::adopt(const fs::path& repo, const fs::path& worktree, const std::string& commit) {
  fs::path entry = dir_ / commit;
  try {
    if (fs::exists(entry)) remove_worktree(repo, entry);
    git(repo, {"worktree", "move", worktree.string(), entry.string()});
  } catch (const std::exception&) {
    return false;
  }
  mark_used(entry);
  evict(repo);
  return true;
}

}  // namespace kw::agent
