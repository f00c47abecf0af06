#include "project/repo_config.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "kw/common/json_reader.hpp"

namespace kw::agent {

namespace {

using common::index_path;
using common::JsonReader;
using nlohmann::json;

constexpr double kDefaultStageTimeout = 600;

std::vector<std::string> string_list(JsonReader& reader, std::string_view key, bool required) {
  std::vector<std::string> out;
  const json* array = required ? &reader.array(key) : reader.opt_array(key);
  if (array == nullptr) return out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    out.push_back(JsonReader::as_string((*array)[i], index_path(reader.child(key), i), false));
  }
  return out;
}

std::array<std::int64_t, 3> dims(JsonReader& reader, std::string_view key) {
  const json& value = reader.require(key);
  if (!value.is_array() || value.empty() || value.size() > 3)
    JsonReader::fail(reader.child(key), "must be an array of 1 to 3 positive integers", "wrong_type");
  std::array<std::int64_t, 3> out{1, 1, 1};
  for (std::size_t i = 0; i < value.size(); ++i)
    out[i] = JsonReader::as_integer(value[i], index_path(reader.child(key), i), 1, INT32_MAX);
  return out;
}

LaunchExpectation launch_expectation(JsonReader& reader) {
  LaunchExpectation expected;
  expected.kernel = reader.string("kernel");
  if (reader.find("block")) expected.block = dims(reader, "block");
  if (reader.find("grid")) expected.grid = dims(reader, "grid");
  expected.max_registers = reader.opt_integer("max_registers", 1, 255);
  expected.max_shared_bytes = reader.opt_integer("max_shared_bytes", 0);
  if (reader.find("must_launch")) expected.must_launch = reader.boolean("must_launch");
  return expected;
}

// kernelwatch.json's shape, for repo_config_problems: every key, its type,
// and for some strings the values they may take. parse_repo_config holds
// the values to their rules.
enum class Kind { string, number, integer, boolean, strings, dims, object, objects, string_map, any };

struct Field {
  std::string_view key;
  Kind kind;
  bool required = false;
  const std::vector<Field>* fields = nullptr;  // an object's, or each object's of an array
  std::vector<std::string_view> values = {};   // a string's allowed values
};

const std::vector<Field> kLibraryFields = {{"path", Kind::string, true}, {"symbols", Kind::strings}};
const std::vector<Field> kLaunchFields = {{"kernel", Kind::string, true},
                                          {"block", Kind::dims},
                                          {"grid", Kind::dims},
                                          {"max_registers", Kind::integer},
                                          {"max_shared_bytes", Kind::integer},
                                          {"must_launch", Kind::boolean}};
const std::vector<Field> kCheckFields = {{"command", Kind::strings, true}, {"timeout_s", Kind::number}};
const std::vector<Field> kSanitizeFields = {
    {"tools", Kind::strings, true, nullptr, {"memcheck", "racecheck", "initcheck", "synccheck"}},
    {"cases", Kind::string}};
const std::vector<Field> kBenchFields = {
    {"name", Kind::string, true},
    {"path", Kind::string, true},
    {"format",
     Kind::string,
     false,
     nullptr,
     {"kwbench", "gbench", "nvbench", "python", "perf_report", "do_bench", "tritonbench"}},
    {"args", Kind::strings},
    {"cases", Kind::string},
    {"libraries", Kind::objects, false, &kLibraryFields},
    {"launches", Kind::objects, false, &kLaunchFields},
    {"launch_args", Kind::strings},
    {"check", Kind::object, false, &kCheckFields},
    {"sanitize", Kind::object, false, &kSanitizeFields},
    {"python", Kind::string},
    {"modules", Kind::strings},
    {"candidate", Kind::string},
    {"run_args", Kind::string_map}};
const std::vector<Field> kBuildFields = {{"commands", Kind::strings, true},
                                         {"timeout_s", Kind::number},
                                         {"env", Kind::string_map},
                                         {"clean", Kind::boolean}};
// timeouts_s: a key per stage that has one (common/kw/common/stages.hpp).
const std::vector<Field> kTimeoutFields = [] {
  std::vector<Field> fields;
  for (const common::StageRow& row : common::kStageTable) {
    if (row.timeout_key) fields.push_back({row.text, Kind::number});
  }
  return fields;
}();
const std::vector<Field> kFullBenchFields = {{"replicates", Kind::integer},
                                             {"max_replicates", Kind::integer},
                                             {"confirm_replicates", Kind::integer},
                                             {"resolve_replicates", Kind::integer},
                                             {"prepare_processes", Kind::boolean},
                                             {"prepare_context", Kind::boolean},
                                             {"skip_identical", Kind::boolean},
                                             {"audit_share", Kind::number},
                                             {"min_samples", Kind::integer},
                                             {"max_samples", Kind::integer},
                                             {"budget_s", Kind::number},
                                             {"replicate_seconds", Kind::number},
                                             {"target_se", Kind::number},
                                             {"noise_target", Kind::number},
                                             {"energy_seconds", Kind::number},
                                             {"ab", Kind::boolean},
                                             {"context_pass", Kind::boolean}};
const std::vector<Field> kConfigFields = {{"project", Kind::string, true},
                                          {"build", Kind::object, true, &kBuildFields},
                                          {"benches", Kind::objects, true, &kBenchFields},
                                          {"timeouts_s", Kind::object, false, &kTimeoutFields},
                                          {"full_bench", Kind::object, false, &kFullBenchFields},
                                          {"run_args", Kind::string_map},
                                          {"thresholds", Kind::any}};

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate nearest `word`, if near enough to be what was meant.
std::optional<std::string_view> nearest(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string kind_text(Kind kind) {
  switch (kind) {
    case Kind::string:
      return "a string";
    case Kind::number:
      return "a number";
    case Kind::integer:
      return "an integer";
    case Kind::boolean:
      return "true or false";
    case Kind::strings:
      return "an array of strings";
    case Kind::dims:
      return "an array of 1 to 3 positive integers";
    case Kind::object:
      return "an object";
    case Kind::objects:
      return "an array of objects";
    case Kind::string_map:
      return "an object of strings";
    case Kind::any:
      return "a value";
  }
  return "a value";
}

bool is_integer(const json& value) {
  return value.is_number_integer() || (value.is_number_float() && std::isfinite(value.get<double>()) &&
                                       std::trunc(value.get<double>()) == value.get<double>());
}

void check_fields(const json& object, const std::string& path, const std::vector<Field>& fields,
                  std::vector<std::string>& problems);

void check_string_value(const json& value, const std::string& path, const Field& field,
                        std::vector<std::string>& problems) {
  if (field.values.empty() || !value.is_string()) return;
  const std::string& text = value.get_ref<const std::string&>();
  if (std::find(field.values.begin(), field.values.end(), text) != field.values.end()) return;
  std::string expected;
  for (std::string_view allowed : field.values)
    expected += (expected.empty() ? "" : ", ") + std::string(allowed);
  std::string problem = path + ": unknown value \"" + text + "\"";
  if (auto near = nearest(text, field.values)) problem += "; did you mean \"" + std::string(*near) + "\"?";
  problems.push_back(problem + " (expected " + expected + ")");
}

void check_value(const json& value, const std::string& path, const Field& field,
                 std::vector<std::string>& problems) {
  auto wrong = [&] {
    problems.push_back(path + ": must be " + kind_text(field.kind) + ", got " + common::type_name(value));
  };
  switch (field.kind) {
    case Kind::string:
      if (!value.is_string()) return wrong();
      return check_string_value(value, path, field, problems);
    case Kind::number:
      if (!value.is_number()) wrong();
      return;
    case Kind::integer:
      if (!is_integer(value)) wrong();
      return;
    case Kind::boolean:
      if (!value.is_boolean()) wrong();
      return;
    case Kind::strings:
      if (!value.is_array()) return wrong();
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string())
          problems.push_back(index_path(path, i) + ": must be a string, got " + common::type_name(value[i]));
        else
          check_string_value(value[i], index_path(path, i), field, problems);
      }
      return;
    case Kind::dims:
      if (!value.is_array() || value.empty() || value.size() > 3 ||
          !std::all_of(value.begin(), value.end(), [](const json& d) { return is_integer(d); }))
        problems.push_back(path + ": must be " + kind_text(field.kind));
      return;
    case Kind::object:
      if (!value.is_object()) return wrong();
      return check_fields(value, path, *field.fields, problems);
    case Kind::objects:
      if (!value.is_array()) return wrong();
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_object())
          problems.push_back(index_path(path, i) + ": must be an object, got " + common::type_name(value[i]));
        else
          check_fields(value[i], index_path(path, i), *field.fields, problems);
      }
      return;
    case Kind::string_map:
      if (!value.is_object()) return wrong();
      for (const auto& [key, entry] : value.items()) {
        if (!entry.is_string())
          problems.push_back(path + "." + key + ": must be a string, got " + common::type_name(entry));
      }
      return;
    case Kind::any:
      return;
  }
}

void check_fields(const json& object, const std::string& path, const std::vector<Field>& fields,
                  std::vector<std::string>& problems) {
  auto child = [&](std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  };
  std::vector<std::string_view> known;
  for (const Field& field : fields) known.push_back(field.key);
  std::vector<std::string_view> meant;  // known keys an unknown one was taken for
  for (const auto& [key, _] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string problem = child(key) + ": unknown field";
    if (auto near = nearest(key, known)) {
      problem += "; did you mean `" + std::string(*near) + "`?";
      meant.push_back(*near);
    }
    problems.push_back(problem);
  }
  for (const Field& field : fields) {
    auto it = object.find(std::string(field.key));
    if (it == object.end() || it->is_null()) {
      // A misspelt key already says what is missing.
      if (field.required && std::find(meant.begin(), meant.end(), field.key) == meant.end())
        problems.push_back(child(field.key) + ": is required");
      continue;
    }
    check_value(*it, child(field.key), field, problems);
  }
}

std::string problems_text(const std::vector<std::string>& problems) {
  if (problems.size() == 1) return problems.front();
  std::string text = std::to_string(problems.size()) + " problems: ";
  for (std::size_t i = 0; i < problems.size(); ++i) text += (i ? "; " : "") + problems[i];
  return text;
}

RepoConfig read_repo_config(const json& document);

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : std::runtime_error(problems_text(problems)), problems_(std::move(problems)) {}

std::vector<std::string> repo_config_problems(const json& document) {
  std::vector<std::string> problems;
  if (!document.is_object()) {
    problems.push_back("kernelwatch.json must be an object, got " + common::type_name(document));
    return problems;
  }
  check_fields(document, "", kConfigFields, problems);
  return problems;
}

std::string_view to_string(BenchFormat format) {
  switch (format) {
    case BenchFormat::kwbench:
      return "kwbench";
    case BenchFormat::gbench:
      return "gbench";
    case BenchFormat::nvbench:
      return "nvbench";
    case BenchFormat::python:
      return "python";
  }
  return "kwbench";
}

std::vector<std::string> bench_command(const BenchConfig& bench, const std::filesystem::path& checkout) {
  const std::string path = (checkout / bench.path).string();
  if (bench.format != BenchFormat::python) return {path};
  // A path in the repository, like the script; a bare name is looked up in PATH.
  std::string interpreter = bench.interpreter;
  if (interpreter.find('/') != std::string::npos && std::filesystem::path(interpreter).is_relative())
    interpreter = (checkout / interpreter).string();
  if (bench.form.empty()) return {interpreter, path};
  // kwbench.py is on the bench's PYTHONPATH (bench_env).
  const std::string form_flag = bench.form == "do_bench"      ? "--do-bench"
                                : bench.form == "tritonbench" ? "--tritonbench"
                                                              : "--perf-report";
  std::vector<std::string> argv{interpreter, "-m", "kwbench", form_flag, path};
  if (!bench.candidate.empty()) argv.insert(argv.end(), {"--candidate", bench.candidate});
  for (const auto& [name, expression] : bench.run_args)
    argv.push_back("--run-arg=" + name + "=" + expression);
  return argv;
}

double RepoConfig::timeout_for(common::StageName stage) const {
  if (stage == common::StageName::build) return build_timeout_s;
  auto it = stage_timeouts_s.find(stage);
  return it == stage_timeouts_s.end() ? kDefaultStageTimeout : it->second;
}

namespace {

// The JSON pointer of a problem's path ("benches[0].launches[1].grid: ..."
// -> /benches/0/launches/1/grid); nullopt for a path it cannot name.
std::optional<json::json_pointer> pointer_of(const std::string& problem) {
  const std::string path = problem.substr(0, problem.find(": "));
  if (path.empty() || path.find_first_of(" `") != std::string::npos) return std::nullopt;
  std::string pointer;
  for (char c : path) {
    if (c == '.' || c == '[') {
      pointer += '/';
    } else if (c == '~') {
      pointer += "~0";
    } else if (c == '/') {
      pointer += "~1";
    } else if (c != ']') {
      pointer += c;
    }
  }
  try {
    return json::json_pointer("/" + pointer);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// Removes the value a problem names; false where there is none to remove.
bool prune(json& document, const std::string& problem) {
  std::optional<json::json_pointer> pointer = pointer_of(problem);
  if (!pointer || pointer->empty() || !document.contains(*pointer)) return false;
  json& parent = document.at(pointer->parent_pointer());
  if (parent.is_object()) return parent.erase(pointer->back()) > 0;
  return false;  // an array entry: removing it would renumber the others' paths
}

}  // namespace

std::string line_and_column(const std::string& text, std::size_t byte) {
  // nlohmann's byte counts from 1 and points at the character it could not take.
  const std::size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

RepoConfig parse_repo_config(const json& document) {
  std::vector<std::string> problems = repo_config_problems(document);
  if (!document.is_object()) throw ConfigError(std::move(problems));
  // The rules the shape check cannot see (a value out of range) are read
  // too, each offending value left out in turn so that the next is reached:
  // an unknown key or a wrong type hides no other problem.
  json readable = document;
  std::set<std::string> named;  // the paths a problem names already
  for (const std::string& problem : problems) {
    named.insert(problem.substr(0, problem.find(": ")));
    prune(readable, problem);
  }
  for (std::size_t attempt = 0; attempt < 32; ++attempt) {
    try {
      RepoConfig config = read_repo_config(readable);
      if (problems.empty()) return config;
      break;
    } catch (const common::ValidationError& error) {
      // A missing field is the shape check's to say (a misspelt key says it
      // better); one left out here is no problem of the file.
      if (error.code() == "missing_field") break;
      if (named.insert(error.path()).second) problems.push_back(error.what());
      if (!prune(readable, error.what())) break;
    } catch (const json::exception&) {
      break;  // a shape the check reported: nothing more to learn from reading it
    }
  }
  throw ConfigError(std::move(problems));
}

namespace {

// An object of strings ("build.env", "run_args").
std::map<std::string, std::string> string_map(const json& value, const std::string& path) {
  if (!value.is_object()) JsonReader::fail(path, "must be an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items())
    out[key] = JsonReader::as_string(item, path + "." + key, true);
  return out;
}

void read_build(const json& section, RepoConfig& config) {
  JsonReader build(section, "build");
  config.build_commands = string_list(build, "commands", true);
  if (config.build_commands.empty()) JsonReader::fail("build.commands", "must hold at least one command");
  config.build_timeout_s = build.opt_number("timeout_s", 1).value_or(config.build_timeout_s);
  if (const json* env = build.find("env")) config.build_env = string_map(*env, "build.env");
  if (const json* clean = build.find("clean")) {
    if (!clean->is_boolean()) JsonReader::fail("build.clean", "must be true or false");
    config.build_clean = clean->get<bool>();
  }
  build.reject_unknown_keys();
}

BenchFormat format_of(JsonReader& b) {
  const std::string format = b.opt_string("format").value_or("kwbench");
  if (format == "kwbench") return BenchFormat::kwbench;
  if (format == "gbench") return BenchFormat::gbench;
  if (format == "nvbench") return BenchFormat::nvbench;
  if (format == "python" || format == "perf_report" || format == "do_bench" || format == "tritonbench")
    return BenchFormat::python;
  JsonReader::fail(
      b.child("format"),
      "unknown format \"" + format +
          "\" (expected kwbench, gbench, nvbench, python, perf_report, do_bench or tritonbench)");
}

// `libraries` (a kwbench bench's) and `launches` (what another harness's cases launch).
void read_libraries_and_launches(JsonReader& b, BenchConfig& bench) {
  if (const json* libraries = b.opt_array("libraries")) {
    if (bench.format != BenchFormat::kwbench) {
      JsonReader::fail(b.child("libraries"),
                       "only kwbench benches list libraries (a python bench's load imports `modules`)");
    }
    for (std::size_t k = 0; k < libraries->size(); ++k) {
      JsonReader library((*libraries)[k], index_path(b.child("libraries"), k));
      bench.libraries.push_back({library.string("path"), string_list(library, "symbols", false)});
      library.reject_unknown_keys();
    }
  }
  if (const json* launches = b.opt_array("launches")) {
    if (bench.format == BenchFormat::kwbench) {
      JsonReader::fail(b.child("launches"),
                       "a kwbench bench declares its launches in its cases (Case::expected_launch)");
    }
    for (std::size_t k = 0; k < launches->size(); ++k) {
      JsonReader l((*launches)[k], index_path(b.child("launches"), k));
      bench.launches.push_back(launch_expectation(l));
      l.reject_unknown_keys();
    }
  }
}

// `check` and `sanitize`: the correctness command of a harness that has no
// reference of its own, and the compute-sanitizer tools run in preflight.
void read_checks(JsonReader& b, BenchConfig& bench, bool kwbench_cli) {
  if (const json* check = b.find("check")) {
    if (kwbench_cli) {
      JsonReader::fail(b.child("check"),
                       "a " + std::string(to_string(bench.format)) +
                           " bench checks its cases itself (its cases' check or reference)");
    }
    JsonReader c(*check, b.child("check"));
    bench.check = string_list(c, "command", true);
    bench.check_timeout_s = c.opt_number("timeout_s", 1).value_or(bench.check_timeout_s);
    c.reject_unknown_keys();
  }
  if (const json* sanitize = b.find("sanitize")) {
    JsonReader z(*sanitize, b.child("sanitize"));
    bench.sanitize_tools = string_list(z, "tools", true);
    for (std::size_t k = 0; k < bench.sanitize_tools.size(); ++k) {
      const std::string& tool = bench.sanitize_tools[k];
      if (tool != "memcheck" && tool != "racecheck" && tool != "initcheck" && tool != "synccheck") {
        JsonReader::fail(index_path(z.child("tools"), k),
                         "unknown tool \"" + tool + "\" (memcheck, racecheck, initcheck or synccheck)");
      }
    }
    bench.sanitize_cases = z.opt_string("cases").value_or("");
    if (!bench.sanitize_cases.empty() && !kwbench_cli)
      JsonReader::fail(z.child("cases"), "only a kwbench or python bench selects cases");
    z.reject_unknown_keys();
  }
}

BenchConfig read_bench(const json& value, const std::string& path) {
  JsonReader b(value, path);
  BenchConfig bench;
  bench.name = b.string("name");
  bench.path = b.string("path");
  bench.format = format_of(b);
  if (const std::string format = b.opt_string("format").value_or("");
      format == "perf_report" || format == "do_bench" || format == "tritonbench")
    bench.form = format;
  if (const std::optional<std::string> candidate = b.opt_string("candidate")) {
    if (bench.form.empty())
      JsonReader::fail(b.child("candidate"),
                       "only a perf_report, do_bench or tritonbench bench names a candidate");
    if (candidate->empty()) JsonReader::fail(b.child("candidate"), "must name a provider of the benchmark");
    bench.candidate = *candidate;
  }
  if (const json* run_args = b.find("run_args")) {
    if (bench.form != "perf_report")
      JsonReader::fail(b.child("run_args"),
                       "only a perf_report bench passes its benchmark functions keywords");
    bench.run_args = string_map(*run_args, path + ".run_args");
  }
  // kwbench and python benches speak the kwbench command line.
  const bool kwbench_cli = bench.format == BenchFormat::kwbench || bench.format == BenchFormat::python;
  bench.args = string_list(b, "args", false);
  bench.cases = b.opt_string("cases").value_or("*");
  read_libraries_and_launches(b, bench);
  bench.launch_args = string_list(b, "launch_args", false);
  if (!bench.launch_args.empty() && kwbench_cli)
    JsonReader::fail(b.child("launch_args"),
                     "only gbench and nvbench benches have a launch pass of their own");
  read_checks(b, bench, kwbench_cli);
  if (const std::optional<std::string> interpreter = b.opt_string("python")) {
    if (bench.format != BenchFormat::python)
      JsonReader::fail(b.child("python"), "only a python bench has an interpreter");
    if (interpreter->empty()) JsonReader::fail(b.child("python"), "must name an interpreter");
    bench.interpreter = *interpreter;
  }
  if (b.find("modules") != nullptr && bench.format != BenchFormat::python)
    JsonReader::fail(b.child("modules"), "only a python bench imports modules");
  bench.modules = string_list(b, "modules", false);
  b.reject_unknown_keys();
  return bench;
}

void read_full_bench(const json& section, FullBenchConfig& fb) {
  JsonReader f(section, "full_bench");
  auto count = [&](const char* key, int& into, int least) {
    if (auto value = f.opt_integer(key, least)) {
      if (*value > 1000) JsonReader::fail(f.child(key), "must be at most 1000");
      into = static_cast<int>(*value);
    }
  };
  count("replicates", fb.replicates, 1);
  count("max_replicates", fb.max_replicates, 1);
  count("confirm_replicates", fb.confirm_replicates, 0);
  count("resolve_replicates", fb.resolve_replicates, 0);
  count("min_samples", fb.min_samples, 1);
  if (auto value = f.opt_integer("max_samples", 1))
    fb.max_samples = static_cast<int>(std::min<std::int64_t>(*value, 100000));
  if (fb.max_samples < fb.min_samples)
    JsonReader::fail("full_bench.max_samples", "must be at least full_bench.min_samples");
  if (fb.max_replicates < fb.replicates)
    JsonReader::fail("full_bench.max_replicates", "must be at least full_bench.replicates");
  fb.budget_s = f.opt_number("budget_s", 1).value_or(fb.budget_s);
  fb.replicate_seconds = f.opt_number("replicate_seconds", 0.001).value_or(fb.replicate_seconds);
  fb.target_se = f.opt_number("target_se", 0).value_or(fb.target_se);
  fb.noise_target = f.opt_number("noise_target", 0).value_or(fb.noise_target);
  fb.energy_seconds = f.opt_number("energy_seconds", 0).value_or(fb.energy_seconds);
  if (fb.energy_seconds > 10) JsonReader::fail("full_bench.energy_seconds", "must be at most 10");
  fb.audit_share = f.opt_number("audit_share", 0).value_or(fb.audit_share);
  if (fb.audit_share > 1)
    JsonReader::fail("full_bench.audit_share", "must be at most 1 (every identical case)");
  for (auto [key, into] :
       {std::pair{"ab", &fb.ab}, std::pair{"context_pass", &fb.context_pass},
        std::pair{"prepare_processes", &fb.prepare_processes},
        std::pair{"prepare_context", &fb.prepare_context}, std::pair{"skip_identical", &fb.skip_identical}}) {
    if (const json* flag = f.find(key)) {
      if (!flag->is_boolean()) JsonReader::fail(f.child(key), "must be true or false");
      *into = flag->get<bool>();
    }
  }
  f.reject_unknown_keys();
}

RepoConfig read_repo_config(const json& document) {
  JsonReader reader(document, "");
  RepoConfig config;
  config.project = reader.string("project");
  read_build(reader.require("build"), config);
  const json& benches = reader.array("benches");
  if (benches.empty()) JsonReader::fail("benches", "must hold at least one bench");
  for (std::size_t i = 0; i < benches.size(); ++i) {
    std::string path = index_path("benches", i);
    BenchConfig bench = read_bench(benches[i], path);
    for (const BenchConfig& other : config.benches) {
      if (other.name == bench.name)
        JsonReader::fail(path + ".name", "duplicate bench name \"" + bench.name + "\"");
    }
    config.benches.push_back(std::move(bench));
  }
  if (const json* timeouts = reader.find("timeouts_s")) {
    JsonReader t(*timeouts, "timeouts_s");
    for (const common::StageRow& row : common::kStageTable) {
      if (!row.timeout_key) continue;
      if (auto seconds = t.opt_number(row.text, 1)) config.stage_timeouts_s[row.name] = *seconds;
    }
    t.reject_unknown_keys();
  }
  if (const json* full_bench = reader.find("full_bench")) read_full_bench(*full_bench, config.full_bench);
  // The keywords every perf_report bench's functions get where the bench
  // does not set them itself (a dtype that a whole suite's runner passes).
  if (const json* run_args = reader.find("run_args")) {
    for (const auto& [name, expression] : string_map(*run_args, "run_args")) {
      for (BenchConfig& bench : config.benches) {
        if (bench.form == "perf_report") bench.run_args.try_emplace(name, expression);
      }
    }
  }
  if (const json* thresholds = reader.find("thresholds"))
    config.thresholds = common::parse_thresholds(*thresholds, "thresholds");
  reader.reject_unknown_keys();
  return config;
}

}  // namespace

RepoConfig load_repo_config(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    throw ConfigError({file.filename().string() + ": " +
                       (std::filesystem::exists(file) ? "cannot be read"
                                                      : "no such file in the commit (kw init writes one)")});
  }
  std::stringstream text;
  text << in.rdbuf();
  // What nlohmann says after its own prefix and position: "syntax error while parsing ...".
  auto parse_error_reason = [](const json::parse_error& error) {
    const std::string what = error.what();
    const std::size_t at = what.find("parse error");
    const std::size_t colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
    return colon == std::string::npos ? what : what.substr(colon + 2);
  };
  json document;
  try {
    document = json::parse(text.str());
  } catch (const json::parse_error& error) {
    throw ConfigError({file.filename().string() + ": not valid JSON at " +
                       line_and_column(text.str(), error.byte) + ": " + parse_error_reason(error)});
  }
  return parse_repo_config(document);
}

}  // namespace kw::agent
