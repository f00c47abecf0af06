// The git operations of the agent: a mirror per project, a detached worktree
// per job, commit and branch resolution.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

namespace kw::agent {

// Runs git in `dir`; throws std::runtime_error with git's output on failure.
std::string git(const std::filesystem::path& dir, const std::vector<std::string>& args,
                double timeout_s = 600);

std::string resolve_commit(const std::filesystem::path& repo, const std::string& rev);
std::string current_branch(const std::filesystem::path& repo);

// Clones `url` as a mirror under `mirrors_dir` the first time, fetches after.
std::filesystem::path update_mirror(const std::filesystem::path& mirrors_dir, const std::string& project,
                                    const std::string& url);
void add_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir,
                  const std::string& commit);
void remove_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir);

}  // namespace kw::agent
