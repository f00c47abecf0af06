#include "git.hpp"

#include <stdexcept>

#include "kw/common/subprocess.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;
using common::shell;

namespace fs = std::filesystem;

std::string git(const fs::path& dir, const std::vector<std::string>& args, double timeout_s) {
  ChildSpec spec;
  spec.argv = {"git"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.cwd = dir;
  spec.timeout_s = timeout_s;
  spec.env = {{"GIT_TERMINAL_PROMPT", "0"}};
  ChildOutcome outcome = run_child(spec);
  if (!outcome.ok()) {
    std::string command;
    for (const std::string& arg : args) command += " " + arg;
    throw std::runtime_error("git" + command + " (in " + dir.string() + ") " + outcome.describe() + ": " +
                             outcome.output_tail);
  }
  return outcome.output_tail;
}

namespace {
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}
}  // namespace

std::string resolve_commit(const fs::path& repo, const std::string& rev) {
  return first_line(git(repo, {"rev-parse", "--verify", rev + "^{commit}"}));
}

std::string current_branch(const fs::path& repo) {
  std::string branch = first_line(git(repo, {"rev-parse", "--abbrev-ref", "HEAD"}));
  return branch == "HEAD" ? "detached" : branch;
}

fs::path update_mirror(const fs::path& mirrors_dir, const std::string& project, const std::string& url) {
  fs::create_directories(mirrors_dir);
  fs::path mirror = mirrors_dir / (project + ".git");
  if (!fs::exists(mirror / "HEAD")) {
    git(mirrors_dir, {"clone", "--mirror", url, mirror.string()});
  } else {
    git(mirror, {"remote", "update", "--prune"});
  }
  return mirror;
}

void add_worktree(const fs::path& repo, const fs::path& dir, const std::string& commit) {
  if (fs::exists(dir)) remove_worktree(repo, dir);
  git(repo, {"worktree", "add", "--detach", "--force", dir.string(), commit});
}

void remove_worktree(const fs::path& repo, const fs::path& dir) {
  try {
    git(repo, {"worktree", "remove", "--force", dir.string()});
  } catch (const std::exception&) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    git(repo, {"worktree", "prune"});
  }
}

}  // namespace kw::agent
