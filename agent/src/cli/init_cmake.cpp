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

namespace {

// The project's CMake files: its top, cmake/ and every CMakeLists.txt below.
std::vector<fs::path> cmake_files_of(const fs::path& source_dir) {
  std::vector<fs::path> files = {source_dir / "CMakeLists.txt"};
  for (const fs::path& file : files_of(source_dir / "cmake", {".cmake"}, 50)) files.push_back(file);
  for (const fs::path& file : files_of(source_dir, {"CMakeLists.txt"}, 200)) {
    if (file != source_dir / "CMakeLists.txt") files.push_back(file);
  }
  return files;
}

// What the plain set(VAR ON|OFF) of the CMake files give a variable when
// the project is the top one, as kernelwatch builds it: a set() inside
// if(<this project is the top one>) wins (cuCollections'
// default_build_option_state); else the unconditional ones, where they agree.
struct PlainSets {
  std::map<std::string, std::set<bool>> anywhere;
  std::map<std::string, bool> when_top_level;

  // One file, a line at a time, following if/elseif/else/endif.
  void read(const std::string& text) {
    static const std::regex set_line(R"re(^\s*set\s*\(\s*([A-Za-z0-9_]+)\s+([A-Za-z0-9]+)\s*\))re",
                                     std::regex::icase);
    static const std::regex branch(R"(^\s*(if|elseif|else|endif)\s*\((.*))", std::regex::icase);
    std::vector<bool> top_level;  // per open if: whether this branch runs only for the top project
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::smatch match;
      if (std::regex_search(line, match, branch)) {
        std::string keyword = match[1];
        for (char& c : keyword) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (keyword == "if") top_level.push_back(tests_top_level(match[2]));
        if ((keyword == "elseif" || keyword == "else") && !top_level.empty()) top_level.back() = false;
        if (keyword == "endif" && !top_level.empty()) top_level.pop_back();
      } else if (std::regex_search(line, match, set_line)) {
        const bool value = truthy(match[2]);
        if (std::find(top_level.begin(), top_level.end(), true) != top_level.end())
          when_top_level[match[1]] = value;
        else if (top_level.empty())
          anywhere[match[1]].insert(value);
      }
    }
  }

  static bool tests_top_level(const std::string& condition) {
    if (std::regex_search(condition, std::regex(R"(\bNOT\b)"))) return false;
    if (condition.find("IS_TOP_LEVEL") != std::string::npos) return true;
    return condition.find("STREQUAL") != std::string::npos &&
           condition.find("CMAKE_SOURCE_DIR") != std::string::npos &&
           (condition.find("CMAKE_CURRENT_SOURCE_DIR") != std::string::npos ||
            condition.find("CMAKE_CURRENT_LIST_DIR") != std::string::npos ||
            condition.find("PROJECT_SOURCE_DIR") != std::string::npos);
  }

  std::optional<bool> value_of(const std::string& variable) const {
    if (auto it = when_top_level.find(variable); it != when_top_level.end()) return it->second;
    if (auto it = anywhere.find(variable); it != anywhere.end() && it->second.size() == 1)
      return *it->second.begin();
    return std::nullopt;
  }
};

// What a default written as ${VAR} is, where the files say: nullopt when
// they do not (a parent project, a preset or the environment may set it).
std::optional<bool> evaluate_default(const std::string& variable, const std::vector<CmakeOption>& options,
                                     const PlainSets& plain_sets) {
  if (variable == "PROJECT_IS_TOP_LEVEL" ||
      (variable.size() > 13 && variable.compare(variable.size() - 13, 13, "_IS_TOP_LEVEL") == 0))
    return true;
  for (const CmakeOption& option : options) {
    if (option.name == variable && option.unjudged_default.empty()) return option.default_on;
  }
  return plain_sets.value_of(variable);
}

}  // namespace

std::vector<CmakeOption> cmake_options(const fs::path& source_dir) {
  static const std::regex declared(
      R"re((?:^|[^A-Za-z0-9_])(option|cmake_dependent_option)\s*\(\s*([A-Za-z0-9_.+-]+)\s+"[^"]*"\s*(\$\{[A-Za-z0-9_]+\}|[A-Za-z0-9]*))re",
      std::regex::icase);
  static const std::regex cached_bool(
      R"re((?:^|[^A-Za-z0-9_])set\s*\(\s*([A-Za-z0-9_.+-]+)\s+(\$\{[A-Za-z0-9_]+\}|[A-Za-z0-9]+)\s+CACHE\s+BOOL)re",
      std::regex::icase);
  std::vector<CmakeOption> found;
  PlainSets plain_sets;
  auto add = [&found](const std::string& name, const std::string& default_text) {
    if (std::any_of(found.begin(), found.end(), [&](const CmakeOption& o) { return o.name == name; })) return;
    CmakeOption option{name, truthy(default_text), {}};
    if (default_text.rfind("${", 0) == 0) option.unjudged_default = default_text;
    found.push_back(std::move(option));
  };
  for (const fs::path& file : cmake_files_of(source_dir)) {
    const std::string text = read_text(file);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), declared); it != std::sregex_iterator();
         ++it)
      add((*it)[2], (*it)[3]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), cached_bool); it != std::sregex_iterator();
         ++it)
      add((*it)[1], (*it)[2]);
    plain_sets.read(text);
  }
  // An option's default may be another's: evaluated in declaration order.
  for (CmakeOption& option : found) {
    if (option.unjudged_default.empty()) continue;
    const std::string variable = option.unjudged_default.substr(2, option.unjudged_default.size() - 3);
    if (const std::optional<bool> value = evaluate_default(variable, found, plain_sets)) {
      option.default_on = *value;
      option.unjudged_default.clear();
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
    if (bench && !unwanted && (!option.default_on || !option.unjudged_default.empty()))
      found.push_back(option.name);
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
    out.configure_failure = "cmake could not configure the project here (" + outcome.describe() + "): " +
                            configure_failure(outcome.output_tail, source_dir, repo, options.build_dir);
    out.notes.push_back(out.configure_failure + "; targets read from the CMake files instead");
  } else {
    if (configured) out.notes.push_back("CMake: read the configured build tree " + options.build_dir);
    out.read_configured_tree = configured;
    benches_of_reply(reply, build, options, out);
  }
  std::error_code ignored;
  if (!scratch.empty()) fs::remove_all(scratch, ignored);
  return read;
}

namespace {

// CMake's first "CMake Error at FILE:LINE (COMMAND):" with its indented
// message on one line; else the output's first line that names an error.
std::string first_cmake_error(const std::string& output) {
  std::istringstream lines(output);
  std::string error, fallback;
  for (std::string line; std::getline(lines, line);) {
    if (error.empty()) {
      if (line.rfind("CMake Error", 0) == 0) {
        error = line;
      } else if (fallback.empty() && line.find("rror") != std::string::npos) {
        fallback = line;
      }
      continue;
    }
    if (line.empty()) {
      if (error.back() != ':') break;  // the blank line after the message
      continue;
    }
    if (line.rfind("  ", 0) != 0) break;
    error += " " + line.substr(line.find_first_not_of(' '));
  }
  return error.empty() ? fallback : error;
}

// Where the project's configure downloads ("CMakeLists.txt:20 calls
// file(DOWNLOAD ...)"); empty: nowhere found.
std::string download_in(const fs::path& source_dir, const fs::path& repo) {
  static const std::regex downloads(
      R"re((file\s*\(\s*DOWNLOAD|FetchContent_(?:Declare|MakeAvailable|Populate)|CPMAddPackage|CPMFindPackage|rapids_cpm_[a-z_]+|ExternalProject_Add))re",
      std::regex::icase);
  for (const fs::path& file : cmake_files_of(source_dir)) {
    std::ifstream in(file);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      const std::size_t comment = line.find('#');
      std::smatch match;
      if (std::regex_search(line, match, downloads) &&
          (comment == std::string::npos || static_cast<std::size_t>(match.position(0)) < comment))
        return in_repo(file, repo) + ":" + std::to_string(number) + " calls " + match.str(1) +
               (match.str(1).find('(') == std::string::npos ? "" : " ...)");
    }
  }
  return {};
}

}  // namespace

std::string configure_failure(const std::string& output, const fs::path& source_dir, const fs::path& repo,
                              const std::string& build_dir) {
  std::string why = first_cmake_error(output);
  if (why.empty()) why = "CMake printed no error";
  static const std::regex network(R"(download|resolve host|Could not connect|network|TLS|SSL)",
                                  std::regex::icase);
  const std::string where = download_in(source_dir, repo);
  if (!where.empty()) {
    why += ". The configure downloads (" + where + ")";
  } else if (std::regex_search(output, network)) {
    why += ". The configure downloads";
  } else {
    return why +
           ". Configure a build tree in the repository yourself and pass it with --build-dir (none at " +
           build_dir + ")";
  }
  return why +
         ": configure a build tree in the repository yourself, where it can download (or offline, "
         "with its dependencies at hand), and pass it with --build-dir (none at " +
         build_dir + "): kw init re-reads a configured tree, with its options and generator";
}

namespace {

// A function or macro of the project that makes a bench target from its
// arguments: add_executable(<target> ...) and target_link_libraries(<target>
// ... nvbench|benchmark ...) in its body, <target> written with its
// parameters (${NAME}, ${ARGV0}, or ${PREFIX_KEY} of cmake_parse_arguments).
struct BenchMaker {
  std::string name, target, kind, prefix, defined_in;
  std::vector<std::string> params;
  std::vector<std::string> keys;  // cmake_parse_arguments' one-value keywords
  // Its RUNTIME_OUTPUT_DIRECTORY under ${CMAKE_BINARY_DIR} or
  // ${PROJECT_BINARY_DIR} ("benchmarks"), where it sets one.
  std::optional<std::string> output_dir;
};

std::vector<std::string> words_of(const std::string& text, char separator = ' ') {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + separator) {
    const bool space = separator == ' ' ? std::isspace(static_cast<unsigned char>(c)) != 0 : c == separator;
    if (!space && c != '"') {
      word += c;
    } else if (space && !word.empty()) {
      words.push_back(std::move(word));
      word.clear();
    }
  }
  return words;
}

std::vector<BenchMaker> bench_makers(const std::vector<fs::path>& files, const fs::path& repo) {
  static const std::regex definition(R"((function|macro)\s*\(\s*([A-Za-z0-9_]+)([^)]*)\))",
                                     std::regex::icase);
  static const std::regex executable(R"(add_executable\s*\(\s*([^\s)]*\$\{[^\s)]*))", std::regex::icase);
  static const std::regex link(R"(target_link_libraries\s*\(\s*([^\s)]+)([^)]*)\))", std::regex::icase);
  static const std::regex parsed(
      R"re(cmake_parse_arguments\s*\(\s*(?:PARSE_ARGV\s+\d+\s+)?([A-Za-z0-9_]+)\s+"[^"]*"\s+"([^"]*)")re",
      std::regex::icase);
  static const std::regex output_dir(
      R"re(RUNTIME_OUTPUT_DIRECTORY\s+"?\$\{(?:CMAKE|PROJECT)_BINARY_DIR\}/?([A-Za-z0-9_./-]*))re");
  std::vector<BenchMaker> makers;
  for (const fs::path& file : files) {
    const std::string text = read_text(file);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), definition); it != std::sregex_iterator();
         ++it) {
      const std::string keyword = (*it)[1];
      const std::regex end("end" + keyword + "\\s*\\(", std::regex::icase);
      std::smatch closing;
      const auto body_start = text.begin() + it->position(0) + it->length(0);
      if (!std::regex_search(body_start, text.end(), closing, end)) continue;
      const std::string body(body_start, closing[0].first);
      std::smatch made;
      if (!std::regex_search(body, made, executable)) continue;
      BenchMaker maker{(*it)[2], made[1], {}, {}, in_repo(file, repo), words_of((*it)[3]), {}, std::nullopt};
      for (auto l = std::sregex_iterator(body.begin(), body.end(), link); l != std::sregex_iterator(); ++l) {
        if ((*l)[1] == maker.target && maker.kind.empty()) maker.kind = kind_of_links((*l)[2]);
      }
      if (std::smatch dir; std::regex_search(body, dir, output_dir)) maker.output_dir = dir[1];
      if (std::smatch keys; std::regex_search(body, keys, parsed)) {
        maker.prefix = keys[1];
        maker.keys = words_of(keys[2], ';');
      }
      if (!maker.kind.empty()) makers.push_back(std::move(maker));
    }
  }
  return makers;
}

// The target a call makes: the maker's target with the call's arguments in
// place of its parameters; empty when one is left unknown.
std::string target_of_call(const BenchMaker& maker, const std::vector<std::string>& args) {
  std::map<std::string, std::string> values;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i < maker.params.size()) values[maker.params[i]] = args[i];
    values["ARGV" + std::to_string(i)] = args[i];
  }
  for (const std::string& key : maker.keys) {
    auto at = std::find(args.begin(), args.end(), key);
    if (at != args.end() && at + 1 != args.end()) values[maker.prefix + "_" + key] = *(at + 1);
  }
  std::string target = maker.target;
  for (const auto& [name, value] : values) {
    for (std::size_t at; (at = target.find("${" + name + "}")) != std::string::npos;)
      target.replace(at, name.size() + 3, value);
  }
  return target.find("${") == std::string::npos ? target : std::string();
}

// A target found in the CMake files: built into the folder of the file that
// made it, unless its maker says where (`output_dir`, under the build tree's top).
void add_guessed(const fs::path& repo, const fs::path& file, const std::string& target,
                 const std::string& kind, const std::string& how, const InitOptions& options, Inspection& out,
                 const std::optional<std::string>& output_dir = std::nullopt) {
  const fs::path dir = output_dir ? fs::path(*output_dir) : fs::relative(file.parent_path(), repo);
  const std::string path = (fs::path(options.build_dir) / dir / target).lexically_normal().generic_string();
  out.benches.push_back({bench_name(target), kind, path, in_repo(file, repo) + ": " + how});
  out.todos.push_back("check benches[\"" + bench_name(target) + "\"].path (" + path + "): guessed from " +
                      in_repo(file, repo) + ", not from a configured build");
}

}  // namespace

void cmake_files(const fs::path& repo, const InitOptions& options, Inspection& out) {
  static const std::regex executable(R"(add_executable\s*\(\s*([A-Za-z0-9_.+-]+))");
  static const std::regex link(R"(target_link_libraries\s*\(\s*([A-Za-z0-9_.+-]+)([^)]*)\))");
  const std::vector<fs::path> files = files_of(repo, {"CMakeLists.txt", ".cmake"});
  for (const fs::path& file : files) {
    if (file.filename() != "CMakeLists.txt") continue;
    const std::string text = read_text(file);
    std::set<std::string> executables;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), executable); it != std::sregex_iterator();
         ++it)
      executables.insert((*it)[1]);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1], kind = kind_of_links((*it)[2]);
      if (!kind.empty() && executables.contains(target) &&
          selected(options.only, {bench_name(target), target}))
        add_guessed(repo, file, target, kind, target, options, out);
    }
  }
  for (const BenchMaker& maker : bench_makers(files, repo)) {
    const std::regex call("(?:^|[^A-Za-z0-9_])" + maker.name + "\\s*\\(([^)]*)\\)", std::regex::icase);
    std::size_t unknown = 0;
    for (const fs::path& file : files) {
      const std::string text = read_text(file);
      for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator();
           ++it) {
        const std::string target = target_of_call(maker, words_of((*it)[1]));
        if (target.empty()) {
          ++unknown;
        } else if (selected(options.only, {bench_name(target), target})) {
          add_guessed(repo, file, target, maker.kind,
                      target + ", made by " + maker.name + "() of " + maker.defined_in, options, out,
                      maker.output_dir);
        }
      }
    }
    if (unknown > 0)
      out.notes.push_back(std::to_string(unknown) + " call(s) of " + maker.name + "() (" + maker.defined_in +
                          ") name their target through a variable: not read without a configure");
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
  const fs::path tree = repo / options.build_dir;
  std::string configure = "cmake -S " +
                          (in_repo(source_dir, repo) == "." ? std::string(".") : in_repo(source_dir, repo)) +
                          " -B " + options.build_dir;
  if (const std::string generator = out.read_configured_tree ? cache_value(tree, "CMAKE_GENERATOR") : "";
      !generator.empty())
    configure += generator.find(' ') == std::string::npos ? " -G " + generator : " -G \"" + generator + "\"";
  configure += " -DCMAKE_BUILD_TYPE=Release";
  std::vector<std::string> from_cache, unjudged;
  for (const CmakeOption& option : declared) {
    const bool bench =
        std::find(bench_options.begin(), bench_options.end(), option.name) != bench_options.end();
    const std::string cached = out.read_configured_tree ? cache_value(tree, option.name) : std::string();
    if (bench && (cached.empty() || truthy(cached))) {
      configure += " -D" + option.name + "=ON";
    } else if (!cached.empty() && (!option.unjudged_default.empty() || truthy(cached) != option.default_on)) {
      configure += " -D" + option.name + "=" + (truthy(cached) ? "ON" : "OFF");
      (option.unjudged_default.empty() ? from_cache : unjudged)
          .push_back(option.name + " (" + option.unjudged_default + ")");
    }
  }
  // The build's own parallelism: a Makefile tree builds one file at a time otherwise.
  out.build_commands = {configure,
                        "cmake --build " + options.build_dir + " -j \"$(nproc)\" --target" + targets};
  auto listed = [](const std::vector<std::string>& names, bool with_default) {
    std::string text;
    for (const std::string& name : names)
      text += (text.empty() ? "" : ", ") + (with_default ? name : name.substr(0, name.find(" (")));
    return text;
  };
  if (!from_cache.empty())
    out.notes.push_back("build.commands[0]: " + listed(from_cache, false) + " as your " + options.build_dir +
                        " tree has them (its CMakeCache.txt), not the project's default");
  if (!unjudged.empty())
    out.notes.push_back(
        "build.commands[0]: " + listed(unjudged, true) + " set as your " + options.build_dir +
        " tree has them: their default is a variable kw init cannot evaluate from the CMake files");
  if (out.read_configured_tree)
    out.todos.push_back("build.commands[0]: any other -D setting your " + options.build_dir +
                        " tree was configured with (compilers, dependency paths): kernelwatch builds each "
                        "commit in a fresh checkout");
}

}  // namespace kw::agent
