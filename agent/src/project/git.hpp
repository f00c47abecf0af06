// The git operations of the agent: a mirror per project, a detached worktree
// per job, commit and branch resolution.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kw/common/run_report.hpp"

namespace kw::agent {

// Runs git in `dir`; throws std::runtime_error with git's output on failure.
std::string git(const std::filesystem::path& dir, const std::vector<std::string>& args,
                double timeout_s = 600);

std::string resolve_commit(const std::filesystem::path& repo, const std::string& rev);
std::string current_branch(const std::filesystem::path& repo);

// Tree, parents, author, subject and commit time of `commit`; nullopt where
// `repo` is not a git checkout that has it.
std::optional<common::CommitInfo> commit_info(const std::filesystem::path& repo, const std::string& commit);

// The `thresholds` of kernelwatch.json as committed in `commit`: empty where
// that commit has no kernelwatch.json or the file sets none; nullopt (said
// through `log`) where it cannot be read or is not valid.
std::optional<common::Thresholds> committed_thresholds(const std::filesystem::path& repo,
                                                       const std::string& commit,
                                                       const std::function<void(const std::string&)>& log);

// Clones `url` as a mirror under `mirrors_dir` the first time, fetches after.
std::filesystem::path update_mirror(const std::filesystem::path& mirrors_dir, const std::string& project,
                                    const std::string& url);
void add_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir,
                  const std::string& commit);
void remove_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir);

}  // namespace kw::agent
