// The build trees of a GPU host: worktrees whose build outputs are kept for
// the next build, bounded and evicted least recently used first.
// - A branch tree per project and branch: a job checks its commit out there
//   and builds incrementally on the branch's previous commit.
// - A commit tree per built base: a pull request's base commit, built once
//   and kept for the next pull request on it and for re-runs.
// A tree whose build succeeded serves as that commit's built checkout (a PR
// base, a re-run) until its tree checks out another commit. A tree is never
// moved: a build tree holds absolute paths (CMake's cache, a bench's RUNPATH
// to the project's own shared libraries) that a move would break. Each
// tree's state (the commit it holds, whether that built) is a file beside
// it, outside the worktree, so that a clean build cannot remove it.
// Several processes share one cache (a job's shards, one `kw run --base` on
// each GPU): a process holds a shared lock on each tree it uses (a
// `<tree>.use` file beside it) until finish(), and eviction, under the
// cache's lock, passes over a tree another process holds.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kw::agent {

// Where a job builds, and the commit whose build outputs the tree already
// holds (empty: a fresh checkout; the job's own commit: a re-run).
struct BuildTree {
  std::filesystem::path path;
  std::string built_from;
};

// Where `kw run --base` and `kw profile` keep built commits: `cache_dir`,
// else ~/.kw/built (their builds go through the ccache beside it).
std::filesystem::path user_built_cache(const std::string& cache_dir);

class BuiltCommits {
 public:
  // Builds go through the compiler cache in `ccache_dir` where ccache is
  // installed (see build_checkout).
  BuiltCommits(std::filesystem::path dir, std::size_t capacity, std::filesystem::path ccache_dir = {});
  ~BuiltCommits();
  BuiltCommits(const BuiltCommits&) = delete;
  BuiltCommits& operator=(const BuiltCommits&) = delete;

  // A built checkout of `commit` (40 hex): a tree that holds its build, or a
  // commit tree checked out of `repo` and built with that commit's own
  // kernelwatch.json. nullopt, with the reason in `why`, when it cannot be
  // had. The tree is not evicted before finish(). Processes sharing `dir`
  // take turns: one that finds another building waits for it.
  std::optional<std::filesystem::path> get(const std::filesystem::path& repo, const std::string& commit,
                                           const std::atomic<bool>& stop,
                                           const std::function<void(const std::string&)>& log,
                                           std::string& why);

  // Where a job of `project`'s `branch` builds `commit`: the tree that built
  // it before (a re-run), else the branch's tree with `commit` checked out
  // over the previous commit's build outputs, else a fresh checkout of
  // `repo` as the branch's tree. Until finish() the tree counts as unbuilt.
  BuildTree checkout_for(const std::filesystem::path& repo, const std::string& project,
                         const std::string& branch, const std::string& commit,
                         const std::function<void(const std::string&)>& log);
  // Removes every untracked and ignored file of the tree: the next build is
  // from scratch.
  static void clean(const BuildTree& tree);
  // After the job: a commit that built is kept; a commit tree whose build
  // failed is removed, a branch tree stays for the branch's next commit.
  // The job's trees are let go, then the least recently used trees beyond
  // the capacity are evicted; not now when another process holds the
  // cache's lock (the next get() or finish() does it).
  void finish(const std::filesystem::path& repo, const BuildTree& tree, const std::string& commit,
              bool built);

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::optional<std::filesystem::path> find_built(const std::string& commit) const;
  // Holds `tree` for this process (its use lock, shared) until finish().
  void use(const std::filesystem::path& tree);
  void let_go();
  void let_go(const std::filesystem::path& tree);
  // Under the cache's lock.
  void evict(const std::filesystem::path& repo);
  void remove(const std::filesystem::path& repo, const std::filesystem::path& tree);

  std::filesystem::path dir_;
  std::size_t capacity_;
  std::filesystem::path ccache_dir_;
  // The current job's trees, each with its use lock's descriptor: never
  // evicted under it, by this process or another.
  std::map<std::filesystem::path, int> in_use_;
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
