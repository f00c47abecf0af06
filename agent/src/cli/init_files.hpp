// kw init's reading of a repository: its own files (no build trees, hidden
// folders or vendored code), their text, and the --only globs.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <regex>
#include <string>
#include <vector>

namespace kw::agent {

std::string read_text(const std::filesystem::path& file);
// A folder kw init does not look in: hidden, a build tree, vendored code.
bool skipped_dir(const std::filesystem::path& path);
// The repository's files with one of `extensions`, its own (no build trees,
// no hidden folders, no vendored code), at most `limit` of them.
std::vector<std::filesystem::path> files_of(const std::filesystem::path& repo,
                                            std::initializer_list<const char*> extensions,
                                            std::size_t limit = 2000);
// The first group of each match of `pattern` in `text`, each once.
std::vector<std::string> matches(const std::string& text, const std::regex& pattern);
std::string in_repo(const std::filesystem::path& file, const std::filesystem::path& repo);
// Whether --only's globs take a thing of these names; a glob matches a name
// or its last dotted part ("scan" takes bench.example.cpp17.scan).
bool selected(const std::vector<std::string>& only, std::initializer_list<std::string> names);
// The folder of `path` (relative to the repository) named for another
// accelerator's backend (a package's copy of its kernels for Ascend, ROCm,
// Kunlunxin...: _ascend/, backends/amd/), or "" where none is.
std::string other_backend_folder(const std::string& path);

// The distributions the repository's requirements.txt names that `python`
// does not have installed here (none where it names none, or where
// `python` cannot be run). A bench of the repository's Python imports its
// modules, and they import these.
std::vector<std::string> missing_requirements(const std::filesystem::path& repo, const std::string& python);

}  // namespace kw::agent
