#include "repo_config.hpp"

#include <fstream>
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
  if (!value.is_array() || value.size() < 1 || value.size() > 3)
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

}  // namespace

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
  return {interpreter, path};
}

double RepoConfig::timeout_for(common::StageName stage) const {
  if (stage == common::StageName::build) return build_timeout_s;
  auto it = stage_timeouts_s.find(stage);
  return it == stage_timeouts_s.end() ? kDefaultStageTimeout : it->second;
}

RepoConfig parse_repo_config(const json& document) {
  JsonReader reader(document, "");
  RepoConfig config;
  config.project = reader.string("project");
  {
    JsonReader build(reader.require("build"), "build");
    config.build_commands = string_list(build, "commands", true);
    if (config.build_commands.empty()) JsonReader::fail("build.commands", "must hold at least one command");
    config.build_timeout_s = build.opt_number("timeout_s", 1).value_or(config.build_timeout_s);
    if (const json* env = build.find("env")) {
      if (!env->is_object()) JsonReader::fail("build.env", "must be an object of strings");
      for (const auto& [key, value] : env->items()) {
        config.build_env[key] = JsonReader::as_string(value, "build.env." + key, true);
      }
    }
    if (const json* clean = build.find("clean")) {
      if (!clean->is_boolean()) JsonReader::fail("build.clean", "must be true or false");
      config.build_clean = clean->get<bool>();
    }
    build.reject_unknown_keys();
  }
  const json& benches = reader.array("benches");
  if (benches.empty()) JsonReader::fail("benches", "must hold at least one bench");
  for (std::size_t i = 0; i < benches.size(); ++i) {
    std::string path = index_path("benches", i);
    JsonReader b(benches[i], path);
    BenchConfig bench;
    bench.name = b.string("name");
    bench.path = b.string("path");
    std::string format = b.opt_string("format").value_or("kwbench");
    if (format == "kwbench") {
      bench.format = BenchFormat::kwbench;
    } else if (format == "gbench") {
      bench.format = BenchFormat::gbench;
    } else if (format == "nvbench") {
      bench.format = BenchFormat::nvbench;
    } else if (format == "python") {
      bench.format = BenchFormat::python;
    } else {
      JsonReader::fail(b.child("format"),
                       "unknown format \"" + format + "\" (expected kwbench, gbench, nvbench or python)");
    }
    // kwbench and python benches speak the kwbench command line.
    const bool kwbench_cli = bench.format == BenchFormat::kwbench || bench.format == BenchFormat::python;
    bench.args = string_list(b, "args", false);
    bench.cases = b.opt_string("cases").value_or("*");
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
    bench.launch_args = string_list(b, "launch_args", false);
    if (!bench.launch_args.empty() && kwbench_cli)
      JsonReader::fail(b.child("launch_args"),
                       "only gbench and nvbench benches have a launch pass of their own");
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
    for (const BenchConfig& other : config.benches) {
      if (other.name == bench.name)
        JsonReader::fail(b.child("name"), "duplicate bench name \"" + bench.name + "\"");
    }
    config.benches.push_back(std::move(bench));
  }
  if (const json* timeouts = reader.find("timeouts_s")) {
    JsonReader t(*timeouts, "timeouts_s");
    for (common::StageName stage : common::kAllStages) {
      if (stage == common::StageName::build) continue;
      if (auto seconds = t.opt_number(common::to_string(stage), 1)) config.stage_timeouts_s[stage] = *seconds;
    }
    t.reject_unknown_keys();
  }
  if (const json* full_bench = reader.find("full_bench")) {
    JsonReader f(*full_bench, "full_bench");
    FullBenchConfig& fb = config.full_bench;
    auto count = [&](const char* key, int& into, int least) {
      if (auto value = f.opt_integer(key, least)) {
        if (*value > 1000) JsonReader::fail(f.child(key), "must be at most 1000");
        into = static_cast<int>(*value);
      }
    };
    count("replicates", fb.replicates, 1);
    count("max_replicates", fb.max_replicates, 1);
    count("confirm_replicates", fb.confirm_replicates, 0);
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
    for (auto [key, into] : {std::pair{"ab", &fb.ab}, std::pair{"context_pass", &fb.context_pass}}) {
      if (const json* flag = f.find(key)) {
        if (!flag->is_boolean()) JsonReader::fail(f.child(key), "must be true or false");
        *into = flag->get<bool>();
      }
    }
    f.reject_unknown_keys();
  }
  if (const json* thresholds = reader.find("thresholds"))
    config.thresholds = common::parse_thresholds(*thresholds, "thresholds");
  reader.reject_unknown_keys();
  return config;
}

RepoConfig load_repo_config(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw common::ValidationError("", "cannot open " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  json document;
  try {
    document = json::parse(text.str());
  } catch (const json::parse_error& error) {
    throw common::ValidationError("",
                                  file.string() + " is not valid JSON at byte " + std::to_string(error.byte));
  }
  return parse_repo_config(document);
}

}  // namespace kw::agent
