#include "project/git.hpp"

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kw/common/subprocess.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;

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

namespace {
// At most `bytes`, cut where a UTF-8 character starts: the report takes
// names up to 200 bytes.
std::string clipped(std::string text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  text.resize(bytes);
  return text;
}
}  // namespace

std::optional<common::CommitInfo> commit_info(const fs::path& repo, const std::string& commit) {
  std::string text;
  try {
    // The subject last: it is the only field that may hold anything.
    text =
        git(repo, {"show", "-s", "--encoding=UTF-8", "--format=%T%n%P%n%an%n%cI%n%s", commit + "^{commit}"});
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::istringstream lines(text);
  common::CommitInfo info;
  std::string parents;
  std::getline(lines, info.tree);
  std::getline(lines, parents);
  std::getline(lines, info.author);
  std::getline(lines, info.committed_at);
  std::getline(lines, info.subject);
  std::istringstream each(parents);
  for (std::string parent; each >> parent;) info.parents.push_back(parent);
  info.author = clipped(info.author, 200);
  info.subject = clipped(info.subject, 1000);
  if (!common::is_commit_sha(info.tree)) return std::nullopt;
  return info;
}

std::optional<common::Thresholds> committed_thresholds(const fs::path& repo, const std::string& commit,
                                                       const std::function<void(const std::string&)>& log) {
  ChildSpec spec;
  spec.argv = {"git", "cat-file", "-e", commit + ":kernelwatch.json"};
  spec.cwd = repo;
  spec.timeout_s = 60;
  if (!run_child(spec).ok()) {
    // No such file at that commit, or no such commit here.
    try {
      git(repo, {"cat-file", "-e", commit + "^{commit}"}, 60);
    } catch (const std::exception& error) {
      log("thresholds of " + commit.substr(0, 12) + ": cannot read the commit: " + error.what());
      return std::nullopt;
    }
    return common::Thresholds{};
  }
  spec.argv = {"git", "show", commit + ":kernelwatch.json"};
  spec.tail_bytes = std::size_t{16} << 20;
  ChildOutcome outcome = run_child(spec);
  if (!outcome.ok()) {
    log("thresholds of " + commit.substr(0, 12) + ": git show " + outcome.describe());
    return std::nullopt;
  }
  try {
    nlohmann::json config = nlohmann::json::parse(outcome.output_tail);
    auto thresholds = config.find("thresholds");
    if (thresholds == config.end() || thresholds->is_null()) return common::Thresholds{};
    return common::parse_thresholds(*thresholds, "thresholds");
  } catch (const std::exception& error) {
    log("thresholds of " + commit.substr(0, 12) + ": its kernelwatch.json: " + error.what());
    return std::nullopt;
  }
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
