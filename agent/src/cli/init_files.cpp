#include "cli/init_files.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "kw/common/subprocess.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool skipped_dir(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.empty() || name[0] == '.' || name == "build" || name == "node_modules" ||
         name == "third_party" || name == "__pycache__" || name.rfind("build-", 0) == 0 ||
         name.rfind("cmake-build", 0) == 0;
}

// The repository's files with one of `extensions`, its own (no build trees,
// no hidden folders, no vendored code), at most `limit` of them.
std::vector<fs::path> files_of(const fs::path& repo, std::initializer_list<const char*> extensions,
                               std::size_t limit) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(repo, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator() && found.size() < limit; it.increment(ec)) {
    if (ec) break;
    if (it->is_directory(ec)) {
      if (skipped_dir(it->path())) it.disable_recursion_pending();
      continue;
    }
    const std::string name = it->path().filename().string();
    for (const char* extension : extensions) {
      const std::string want = extension;
      if (name.size() >= want.size() && name.compare(name.size() - want.size(), want.size(), want) == 0) {
        found.push_back(it->path());
        break;
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<std::string> matches(const std::string& text, const std::regex& pattern) {
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator();
       ++it) {
    if (std::find(found.begin(), found.end(), (*it)[1].str()) == found.end()) found.push_back((*it)[1]);
  }
  return found;
}

std::string in_repo(const fs::path& file, const fs::path& repo) {
  return fs::relative(file, repo).generic_string();
}

// Whether --only's globs take a thing of these names; a glob matches a name
// or its last dotted part ("scan" takes bench.example.cpp17.scan).
bool selected(const std::vector<std::string>& only, std::initializer_list<std::string> names) {
  if (only.empty()) return true;
  for (const std::string& glob : only) {
    for (const std::string& name : names) {
      if (name.empty()) continue;
      const std::string last = name.substr(name.rfind('.') + 1);
      if (fnmatch(glob.c_str(), name.c_str(), 0) == 0 || fnmatch(glob.c_str(), last.c_str(), 0) == 0)
        return true;
    }
  }
  return false;
}

std::string other_backend_folder(const std::string& path) {
  static const std::set<std::string> backends = {
      "aipu",     "amd",  "arm",   "ascend", "cambricon", "cpu",       "enflame",    "gcu", "habana",
      "hip",      "hpu",  "hygon", "intel",  "iluvatar",  "kunlunxin", "metax",      "mlu", "mps",
      "mthreads", "musa", "npu",   "rocm",   "sunrise",   "tpu",       "tsingmicro", "xpu"};
  const fs::path relative(path);
  fs::path folder;
  for (auto it = relative.begin(); it != relative.end() && std::next(it) != relative.end(); ++it) {
    folder /= *it;
    std::string name = it->string();
    name.erase(0, name.find_first_not_of('_'));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (backends.contains(name)) return folder.generic_string();
  }
  return "";
}

std::vector<std::string> missing_requirements(const fs::path& repo, const std::string& python) {
  std::istringstream lines(read_text(repo / "requirements.txt"));
  std::vector<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    line = line.substr(0, line.find('#'));
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '-') continue;  // an option: -r, -e, --index-url
    std::size_t end = start;
    while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '-' ||
                                 line[end] == '_' || line[end] == '.'))
      ++end;
    if (end > start) names.push_back(line.substr(start, end - start));
  }
  if (names.empty()) return {};
  common::ChildSpec spec;
  spec.argv = {python, "-c",
               "import sys, importlib.metadata as m\n"
               "for n in sys.argv[1:]:\n"
               "    try: m.distribution(n)\n"
               "    except m.PackageNotFoundError: print(n)\n"};
  spec.argv.insert(spec.argv.end(), names.begin(), names.end());
  spec.cwd = repo;
  spec.timeout_s = 60;
  const common::ChildOutcome outcome = common::run_child(spec);
  if (!outcome.ok()) return {};
  std::vector<std::string> missing;
  std::istringstream printed(outcome.output_tail);
  for (std::string name; std::getline(printed, name);) {
    if (std::find(names.begin(), names.end(), name) != names.end()) missing.push_back(name);
  }
  return missing;
}

}  // namespace kw::agent
