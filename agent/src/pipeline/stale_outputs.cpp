#include "pipeline/stale_outputs.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <set>
#include <sstream>

#include "project/git.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

namespace {

// Files whose change can change what a build writes.
bool defines_build(const fs::path& path, const std::set<std::string>& scripts) {
  static const std::set<std::string> kNames = {
      "CMakeLists.txt", "CMakePresets.json", "Makefile",  "GNUmakefile",  "makefile",
      "meson.build",    "meson_options.txt", "setup.py",  "setup.cfg",    "pyproject.toml",
      "BUILD",          "BUILD.bazel",       "WORKSPACE", "MODULE.bazel", "build.ninja"};
  const std::string name = path.filename().string();
  const std::string extension = path.extension().string();
  return kNames.count(name) > 0 || extension == ".cmake" || extension == ".mk" ||
         scripts.count(path.generic_string()) > 0;
}

// The scripts the build commands run from the repository (`./build.sh`,
// `bash tools/build.sh`).
std::set<std::string> build_scripts(const std::vector<std::string>& commands) {
  std::set<std::string> scripts;
  for (const std::string& command : commands) {
    std::istringstream words(command);
    for (std::string word; words >> word;) {
      if (word.rfind("./", 0) == 0) word = word.substr(2);
      if (word.find('/') != std::string::npos || word.find('.') != std::string::npos) scripts.insert(word);
    }
  }
  return scripts;
}

std::string age(fs::file_time_type then, fs::file_time_type now) {
  constexpr std::int64_t kMinute = 60, kHour = 3600, kDay = 86400;
  const std::int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(now - then).count();
  if (seconds < 2 * kMinute) return std::to_string(seconds) + " s";
  if (seconds < 2 * kHour) return std::to_string(seconds / kMinute) + " min";
  if (seconds < 2 * kDay) return std::to_string(seconds / kHour) + " h";
  return std::to_string(seconds / kDay) + " days";
}

}  // namespace

std::optional<std::string> stale_output_problem(const fs::path& file, const fs::path& checkout,
                                                fs::file_time_type build_started,
                                                const std::vector<std::string>& build_commands) {
  // A file outside the repository (an installed tool, a bench built
  // elsewhere) is nothing this build writes.
  const fs::path relative = fs::weakly_canonical(file).lexically_relative(fs::weakly_canonical(checkout));
  if (relative.empty() || *relative.begin() == "..") return std::nullopt;
  std::error_code ec;
  const fs::file_time_type written = fs::last_write_time(file, ec);
  // Some filesystems keep whole seconds: a second of slack.
  if (ec || written >= build_started - std::chrono::seconds(1)) return std::nullopt;
  std::string listed;
  try {
    listed = git(checkout, {"ls-files"});
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::set<std::string> scripts = build_scripts(build_commands);
  fs::file_time_type newest = written;
  std::string newest_name;
  for (std::size_t at = 0; at < listed.size();) {
    std::size_t end = listed.find('\n', at);
    if (end == std::string::npos) end = listed.size();
    const fs::path tracked = listed.substr(at, end - at);
    at = end + 1;
    if (!defines_build(tracked, scripts)) continue;
    const fs::file_time_type changed = fs::last_write_time(checkout / tracked, ec);
    if (!ec && changed > newest) {
      newest = changed;
      newest_name = tracked.generic_string();
    }
  }
  if (newest_name.empty()) return std::nullopt;
  const fs::file_time_type now = fs::file_time_type::clock::now();
  return "not written by this build: last written " + age(written, now) +
         " ago, before the build began and "
         "before " +
         newest_name + " changed (" + age(newest, now) +
         " ago); the build may no longer write it (a renamed output?), so it would measure an earlier "
         "commit's code";
}

}  // namespace kw::agent
