// A cache of built commits on a GPU host: worktrees whose build succeeded,
// kept for pull-request bases and re-runs, bounded and evicted least recently
// used first. Main's own runs fill it (a job builds in the entry of its
// commit and keeps it), so a PR's base is usually built already. An entry
// is never moved: a build tree holds absolute paths (CMake's cache, a bench's
// RUNPATH to the project's own shared libraries) that a move would break.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kw::agent {

class BuiltCommits {
 public:
  // Builds go through the compiler cache in `ccache_dir` where ccache is
  // installed (see build_checkout).
  BuiltCommits(std::filesystem::path dir, std::size_t capacity, std::filesystem::path ccache_dir = {});

  // A built checkout of `commit` (40 hex): from the cache, or checked out of
  // `repo` and built with that commit's own kernelwatch.json. nullopt, with
  // the reason in `why`, when it cannot be had.
  std::optional<std::filesystem::path> get(const std::filesystem::path& repo, const std::string& commit,
                                           const std::atomic<bool>& stop,
                                           const std::function<void(const std::string&)>& log,
                                           std::string& why);

  // Where a job builds `commit`: its entry, checked out of `repo` when it is
  // not there yet. An entry built before (a re-run) is taken as it is, so the
  // job's build is incremental. Until keep() the entry counts as unbuilt.
  std::filesystem::path checkout_for(const std::filesystem::path& repo, const std::string& commit,
                                     const std::function<void(const std::string&)>& log);
  // After the job: a commit that built is kept (and the oldest entries
  // evicted), one that did not is removed.
  void finish(const std::filesystem::path& repo, const std::string& commit, bool built);

  const std::filesystem::path& dir() const { return dir_; }

 private:
  void mark_used(const std::filesystem::path& entry);
  void evict(const std::filesystem::path& repo);

  std::filesystem::path dir_;
  std::size_t capacity_;
  std::filesystem::path ccache_dir_;
};

struct RepoConfig;

// The environment that sends a CMake build's C, C++ and CUDA compiles
// through ccache with its cache in `ccache_dir`, keyed on paths relative to
// `checkout` so that every worktree of a project shares it: empty when
// ccache is not installed (on PATH) or no directory is given. A variable
// the environment or the repository's build.env already sets is left alone.
// `description` says which, for the build stage's details.
std::map<std::string, std::string> compiler_cache_env(const std::filesystem::path& ccache_dir,
                                                      const std::filesystem::path& checkout,
                                                      std::string& description);

// Runs the build commands in `checkout` (through ccache in `ccache_dir`
// where it is installed); the combined output tail in `output`, the failure
// (empty on success) returned.
std::string build_checkout(const RepoConfig& config, const std::filesystem::path& checkout,
                           const std::atomic<bool>& stop, std::string& output, double& seconds,
                           const std::filesystem::path& ccache_dir = {},
                           std::string* compiler_cache = nullptr);

}  // namespace kw::agent
