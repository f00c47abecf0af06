#include "cli/init_cmake.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/init_files.hpp"
#include "kw/common/subprocess.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string kind_of_links(const std::string& links) {
  if (links.find("nvbench") != std::string::npos) return "nvbench";
  if (links.find("benchmark") != std::string::npos) return "gbench";
  return {};
}

std::string bench_name(std::string target) {
  static const std::regex nvbench_example(R"(^nvbench\.example\.(?:cpp\d+\.)?)");
  target = std::regex_replace(target, nvbench_example, "");
  for (const char* prefix : {"bench_", "benchmark_"}) {
    if (target.rfind(prefix, 0) == 0 && target.size() > std::string(prefix).size())
      target = target.substr(std::string(prefix).size());
  }
  for (char& c : target) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return target;
}

bool truthy(std::string value) {
  for (char& c : value) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return value == "ON" || value == "TRUE" || value == "YES" || value == "Y" || value == "1";
}

}  // namespace

// The options of the project's CMake files (its top, cmake/ and every
// CMakeLists.txt below), each once, in the order found.
std::vector<CmakeOption> cmake_options(const fs::path& source_dir) {
  static const std::regex declared(
      R"re((?:^|[^A-Za-z0-9_])(option|cmake_dependent_option)\s*\(\s*([A-Za-z0-9_.+-]+)\s+"[^"]*"\s*([A-Za-z0-9]*))re",
      std::regex::icase);
  std::vector<fs::path> files = {source_dir / "CMakeLists.txt"};
  for (const fs::path& file : files_of(source_dir / "cmake", {".cmake"}, 50)) files.push_back(file);
  for (const fs::path& file : files_of(source_dir, {"CMakeLists.txt"}, 200)) {
    if (file != source_dir / "CMakeLists.txt") files.push_back(file);
  }
  std::vector<CmakeOption> found;
  for (const fs::path& file : files) {
    const std::string text = read_text(file);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), declared); it != std::sregex_iterator();
         ++it) {
      const std::string name = (*it)[2];
      if (std::any_of(found.begin(), found.end(), [&](const CmakeOption& o) { return o.name == name; }))
        continue;
      found.push_back({name, truthy((*it)[3])});
    }
  }
  return found;
}

// The project's options that build its benchmarks (SPDLOG_BUILD_BENCH,
// BUILD_BENCHMARKS, lib.benchmark): a word of the name is BENCH[MARK][S],
// and none is about tests, installs or docs, which a bench build does not
// need. Those already on by default need no flag.
std::vector<std::string> benchmark_options(const std::vector<CmakeOption>& options) {
  std::vector<std::string> found;
  for (const CmakeOption& option : options) {
    bool bench = false, unwanted = false;
    std::string upper = option.name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::istringstream words(std::regex_replace(upper, std::regex("[_.+-]"), " "));
    for (std::string word; words >> word;) {
      bench |= word == "BENCH" || word == "BENCHES" || word == "BENCHMARK" || word == "BENCHMARKS";
      unwanted |= word.find("TEST") != std::string::npos || word == "INSTALL" || word.rfind("DOC", 0) == 0;
    }
    if (bench && !unwanted && !option.default_on) found.push_back(option.name);
  }
  return found;
}

std::string cache_value(const fs::path& build, const std::string& key) {
  std::ifstream in(build / "CMakeCache.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) {
      const std::size_t equals = line.find('=');
      if (equals != std::string::npos) return line.substr(equals + 1);
    }
  }
  return {};
}
namespace {

json read_json(const fs::path& file) {
  return json::parse(read_text(file), nullptr, false);
}

// The executables of CMake's file-API reply that link NVBench or Google
// Benchmark, one per source file (NVBench builds each example once per C++
// standard).
void benches_of_reply(const fs::path& reply, const fs::path& build, const InitOptions& options,
                      Inspection& out) {
  fs::path index;
  for (const auto& entry : fs::directory_iterator(reply)) {
    if (entry.path().filename().string().rfind("index-", 0) == 0) index = entry.path();
  }
  if (index.empty()) return;
  std::string codemodel_file;
  for (const json& object : read_json(index).value("objects", json::array())) {
    if (object.value("kind", "") == "codemodel") codemodel_file = object.value("jsonFile", "");
  }
  if (codemodel_file.empty()) return;
  const json codemodel = read_json(reply / codemodel_file);
  std::set<std::string> sources_seen;
  std::size_t left_out = 0;
  for (const json& configuration : codemodel.value("configurations", json::array())) {
    for (const json& target_ref : configuration.value("targets", json::array())) {
      const json target = read_json(reply / target_ref.value("jsonFile", ""));
      if (!target.is_object() || target.value("type", "") != "EXECUTABLE") continue;
      std::string links;
      for (const json& fragment :
           target.value("link", json::object()).value("commandFragments", json::array()))
        links += fragment.value("fragment", "") + " ";
      for (const json& dependency : target.value("dependencies", json::array()))
        links += dependency.value("id", "") + " ";
      const std::string kind = kind_of_links(links);
      const std::string target_name = target.value("name", "");
      // NVBench's own runner of benchmark libraries holds no benchmark.
      if (kind.empty() || target.value("artifacts", json::array()).empty() || target_name == "nvbench.ctl")
        continue;
      const json sources = target.value("sources", json::array());
      const std::string source = sources.empty() ? target_name : sources[0].value("path", target_name);
      if (!sources_seen.insert(source).second) continue;
      if (!selected(options.only, {bench_name(target_name), target_name})) {
        ++left_out;
        continue;
      }
      // Where the build tree kernelwatch.json names (options.build_dir) will
      // hold it: the file API's path is relative to the tree it read.
      fs::path artifact = target["artifacts"][0].value("path", "");
      if (artifact.is_absolute()) artifact = fs::relative(artifact, build);
      out.benches.push_back(
          {bench_name(target_name), kind,
           (fs::path(options.build_dir) / artifact).lexically_normal().generic_string(),
           "CMake target " + target_name + " links " + (kind == "nvbench" ? "NVBench" : "Google Benchmark")});
    }
    break;  // the one configuration
  }
  if (left_out > 0)
    out.notes.push_back(std::to_string(left_out) + " more benchmark target(s) left out by --only");
}

}  // namespace

// CMake's file API: each executable target with its artifact's path and what
// it links. A build tree configured already is re-read as it is (`cmake
// BUILD`); otherwise the project is configured with its benchmark options on
// in a scratch tree outside the repository, removed once read: kw init
// leaves no build tree behind that was not there.
bool cmake_targets(const fs::path& repo, const fs::path& source_dir,
                   const std::vector<std::string>& bench_options, const InitOptions& options,
                   Inspection& out) {
  const bool configured = fs::exists(repo / options.build_dir / "CMakeCache.txt");
  fs::path build = repo / options.build_dir, scratch;
  if (!configured) {
    char pattern[] = "/tmp/kw-init-cmake-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      out.notes.push_back(
          "no scratch folder for a CMake configure: targets read from the CMake files instead");
      return false;
    }
    build = scratch = pattern;
  }
  fs::create_directories(build / ".cmake/api/v1/query");
  std::ofstream(build / ".cmake/api/v1/query/codemodel-v2").close();
  common::ChildSpec spec;
  if (configured) {
    spec.argv = {"cmake", build.string()};
    say("re-reading the configured build tree " + options.build_dir + " with CMake");
  } else {
    spec.argv = {"cmake", "-S", source_dir.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"};
    for (const std::string& option : bench_options) spec.argv.push_back("-D" + option + "=ON");
    say("configuring with CMake (in " + build.string() + ", removed after) to read its targets");
  }
  spec.cwd = repo;
  spec.timeout_s = 600;
  const common::ChildOutcome outcome = common::run_child(spec);
  const fs::path reply = build / ".cmake/api/v1/reply";
  bool read = outcome.ok() && fs::exists(reply);
  if (!read) {
    std::string last_line;
    std::istringstream lines(outcome.output_tail);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("rror") != std::string::npos && last_line.empty()) last_line = line;
    }
    out.notes.push_back("cmake could not configure the project here (" + outcome.describe() +
                        (last_line.empty() ? "" : ": " + last_line) +
                        "): targets read from the CMake files instead");
  } else {
    if (configured) out.notes.push_back("CMake: read the configured build tree " + options.build_dir);
    out.read_configured_tree = configured;
    benches_of_reply(reply, build, options, out);
  }
  std::error_code ignored;
  if (!scratch.empty()) fs::remove_all(scratch, ignored);
  return read;
}

// Without a configure: add_executable(NAME ...) and target_link_libraries(NAME
// ... nvbench|benchmark ...) in the CMake files; the path is a guess.
void cmake_files(const fs::path& repo, const InitOptions& options, Inspection& out) {
  static const std::regex executable(R"(add_executable\s*\(\s*([A-Za-z0-9_.+-]+))");
  static const std::regex link(R"(target_link_libraries\s*\(\s*([A-Za-z0-9_.+-]+)([^)]*)\))");
  for (const fs::path& file : files_of(repo, {"CMakeLists.txt"})) {
    const std::string text = read_text(file);
    std::set<std::string> executables;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), executable); it != std::sregex_iterator();
         ++it)
      executables.insert((*it)[1]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1], kind = kind_of_links((*it)[2]);
      if (kind.empty() || !executables.contains(target) ||
          !selected(options.only, {bench_name(target), target}))
        continue;
      const fs::path dir = fs::relative(file.parent_path(), repo);
      const std::string path =
          (fs::path(options.build_dir) / dir / target).lexically_normal().generic_string();
      out.benches.push_back({bench_name(target), kind, path, in_repo(file, repo) + ": " + target});
      out.todos.push_back("check benches[\"" + bench_name(target) + "\"].path (" + path + "): guessed from " +
                          in_repo(file, repo) + ", not from a configured build");
    }
  }
}

// How the team builds: its own build script at the top when it has one
// (it knows the options and dependency paths), else CMake's two commands,
// with the benchmark options on and, from a build tree the team configured,
// every option of the project its cache holds at another value than the
// project's default.
void cmake_build_commands(const fs::path& repo, const fs::path& source_dir,
                          const std::vector<CmakeOption>& declared,
                          const std::vector<std::string>& bench_options, const InitOptions& options,
                          Inspection& out) {
  for (const char* script : {"build.sh", "scripts/build.sh"}) {
    if (!fs::exists(repo / script)) continue;
    out.build_commands = {std::string("bash ") + script};
    out.notes.push_back(std::string(script) + ": used as the build command (it must build the benches into " +
                        options.build_dir + ")");
    return;
  }
  std::string targets;
  for (const FoundBench& bench : out.benches) targets += " " + fs::path(bench.path).filename().string();
  std::string configure = "cmake -S " +
                          (in_repo(source_dir, repo) == "." ? std::string(".") : in_repo(source_dir, repo)) +
                          " -B " + options.build_dir + " -DCMAKE_BUILD_TYPE=Release";
  std::vector<std::string> from_cache;
  for (const CmakeOption& option : declared) {
    const bool bench =
        std::find(bench_options.begin(), bench_options.end(), option.name) != bench_options.end();
    const std::string cached =
        out.read_configured_tree ? cache_value(repo / options.build_dir, option.name) : std::string();
    if (bench && (cached.empty() || truthy(cached))) {
      configure += " -D" + option.name + "=ON";
    } else if (!cached.empty() && truthy(cached) != option.default_on) {
      configure += " -D" + option.name + "=" + (truthy(cached) ? "ON" : "OFF");
      from_cache.push_back(option.name);
    }
  }
  out.build_commands = {configure, "cmake --build " + options.build_dir + " --target" + targets};
  if (!from_cache.empty()) {
    std::string names;
    for (const std::string& name : from_cache) names += (names.empty() ? "" : ", ") + name;
    out.notes.push_back("build.commands[0]: " + names + " as your " + options.build_dir +
                        " tree has them (its CMakeCache.txt), not the project's default");
  }
  if (out.read_configured_tree)
    out.todos.push_back("build.commands[0]: any other -D setting your " + options.build_dir +
                        " tree was configured with (compilers, dependency paths): kernelwatch builds each "
                        "commit in a fresh checkout");
}

}  // namespace kw::agent
