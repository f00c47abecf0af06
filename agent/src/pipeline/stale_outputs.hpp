// Whether a file a bench runs is this commit's build output. In a build tree
// that outlives its commits (kw run in a working checkout, an agent's
// incremental branch tree) a file the build no longer writes stays behind:
// a commit that renames the bench's output leaves the old executable, and
// measuring it would time the previous commit's code.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kw::agent {

// Why `file` is not this build's: it was last written before the build
// began, and the build's own definition (a CMakeLists.txt, a setup.py, a
// script the build commands run) changed after that, so the build may no
// longer write it. nullopt when the build wrote it, or when nothing that
// defines the build is newer (an incremental build that had nothing to do
// for it). Files outside the checkout, and those of a checkout that is not a
// git work tree, are not judged.
std::optional<std::string> stale_output_problem(const std::filesystem::path& file,
                                                const std::filesystem::path& checkout,
                                                std::filesystem::file_time_type build_started,
                                                const std::vector<std::string>& build_commands);

}  // namespace kw::agent
