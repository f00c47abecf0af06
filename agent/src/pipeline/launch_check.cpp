#include "pipeline/launch_check.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

InjectedLaunches read_injected_launches(const fs::path& dir) {
  InjectedLaunches out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".jsonl") continue;
    ++out.processes;
    std::ifstream in(entry.path());
    bool ended = false;
    std::string exe, mark, line;
    for (int number = 1; std::getline(in, line); ++number) {
      json record;
      try {
        record = json::parse(line);
      } catch (const std::exception&) {
        // A process killed mid-write leaves its last line cut.
        out.problems.push_back(entry.path().filename().string() + " line " + std::to_string(number) +
                               ": not JSON (the process was cut off)");
        break;
      }
      if (record.contains("start")) {
        exe = record["start"].value("exe", "");
        ended = false;  // a fresh process image (after a broken context) records on
      } else if (record.contains("kernel")) {
        if (!mark.empty()) record["mark"] = mark;
        out.launches.push_back(std::move(record));
      } else if (record.contains("mark")) {
        mark = record["mark"].get<std::string>();
      } else if (record.contains("module")) {
        out.modules.push_back(std::move(record["module"]));
      } else if (record.contains("maps")) {
        for (const json& file : record["maps"]) out.mapped.insert(file.get<std::string>());
      } else if (record.contains("failed_launch")) {
        out.refused.push_back(explain_refused_launch(record["failed_launch"]));
      } else if (record.contains("error")) {
        out.problems.push_back((exe.empty() ? "a bench process" : exe) +
                               ": launch tracing failed: " + record["error"].get<std::string>());
      } else if (record.contains("end") || record.contains("paused")) {
        // Paused: the process records no more (its preflight's launch_geometry
        // ended), and what it recorded is whole, as at an exit.
        ended = true;
        const json& counts = record.contains("end") ? record["end"] : record["paused"];
        if (std::int64_t dropped = counts.value("dropped", 0); dropped > 0) {
          out.problems.push_back((exe.empty() ? "a bench process" : exe) + ": CUPTI dropped " +
                                 std::to_string(dropped) + " launch records");
        }
      }
    }
    if (!ended) {
      out.problems.push_back((exe.empty() ? entry.path().filename().string() : exe) +
                             " ended without a normal exit: its last launches may be missing");
    }
  }
  if (ec) out.problems.push_back("cannot read the launch records in " + dir.string() + ": " + ec.message());
  return out;
}

namespace {

std::string dims_text(const json& value) {
  std::string out = "(";
  for (std::size_t i = 0; i < value.size(); ++i)
    out += (i ? "," : "") + std::to_string(value[i].get<std::int64_t>());
  return out + ")";
}

std::string dims_text(const std::array<std::int64_t, 3>& value) {
  return "(" + std::to_string(value[0]) + "," + std::to_string(value[1]) + "," + std::to_string(value[2]) +
         ")";
}

bool same_dims(const json& observed, const std::array<std::int64_t, 3>& expected) {
  for (std::size_t i = 0; i < 3; ++i)
    if (observed.at(i).get<std::int64_t>() != expected[i]) return false;
  return true;
}

}  // namespace

std::string explain_refused_launch(const json& refused) {
  const std::string kernel = refused.value("kernel", "a kernel");
  std::string out = "the launch of " + kernel + " was refused (" + refused.value("error", "CUDA error") + ")";
  const std::int64_t asked = refused.value("dynamic_smem", std::int64_t{0});
  const std::int64_t allowed = refused.value("max_dynamic_smem", std::int64_t{-1});
  const json& block = refused.contains("block") ? refused["block"] : json::array({1, 1, 1});
  std::int64_t threads = 1;
  for (const json& d : block) threads *= d.get<std::int64_t>();
  const std::int64_t max_threads = refused.value("max_threads_per_block", std::int64_t{-1});
  std::vector<std::string> reasons;
  if (allowed >= 0 && asked > allowed) {
    reasons.push_back(std::to_string(asked) + " bytes of dynamic shared memory asked, " +
                      std::to_string(allowed) +
                      " allowed (raise it with cudaFuncSetAttribute(MaxDynamicSharedMemorySize))");
  }
  if (max_threads > 0 && threads > max_threads) {
    reasons.push_back("a block of " + std::to_string(threads) + " threads, at most " +
                      std::to_string(max_threads) + " for this kernel at " +
                      std::to_string(refused.value("registers", 0)) + " registers per thread");
  }
  if (reasons.empty()) {
    out += ": grid " + dims_text(refused.value("grid", json::array({0, 0, 0}))) + ", block " +
           dims_text(block) + ", " + std::to_string(asked) + " bytes of dynamic shared memory";
  } else {
    out += ": ";
    for (std::size_t i = 0; i < reasons.size(); ++i) out += (i ? "; " : "") + reasons[i];
  }
  return out;
}

LaunchExpectation expectation_of(const json& expected_launch) {
  auto dims = [](const json& value) {
    std::array<std::int64_t, 3> out{1, 1, 1};
    for (std::size_t i = 0; i < value.size() && i < 3; ++i) out[i] = value[i].get<std::int64_t>();
    return out;
  };
  LaunchExpectation rule;
  rule.kernel = expected_launch.at("kernel_pattern").get<std::string>();
  if (expected_launch.contains("block")) rule.block = dims(expected_launch["block"]);
  if (expected_launch.contains("grid")) rule.grid = dims(expected_launch["grid"]);
  if (expected_launch.contains("max_registers"))
    rule.max_registers = expected_launch["max_registers"].get<std::int64_t>();
  if (expected_launch.contains("max_shared_bytes"))
    rule.max_shared_bytes = expected_launch["max_shared_bytes"].get<std::int64_t>();
  return rule;
}

LaunchCheck check_launches(const std::vector<LaunchExpectation>& expected,
                           const std::vector<json>& launches) {
  LaunchCheck check;
  check.details = json::array();
  std::vector<std::string> problems;
  std::map<std::string, int> seen;  // kernel -> launches, for the message when nothing matched
  for (const json& launch : launches) ++seen[launch["kernel"].get<std::string>()];
  for (const LaunchExpectation& rule : expected) {
    int matched = 0;
    std::vector<std::string> wrong;
    for (const json& launch : launches) {
      const std::string kernel = launch["kernel"];
      if (fnmatch(rule.kernel.c_str(), kernel.c_str(), 0) != 0) continue;
      ++matched;
      std::vector<std::string> found;
      if (rule.block && !same_dims(launch["block"], *rule.block))
        found.push_back("block " + dims_text(launch["block"]) + ", expected " + dims_text(*rule.block));
      if (rule.grid && !same_dims(launch["grid"], *rule.grid))
        found.push_back("grid " + dims_text(launch["grid"]) + ", expected " + dims_text(*rule.grid));
      const std::int64_t registers = launch["registers"];
      if (rule.max_registers && registers > *rule.max_registers) {
        found.push_back(std::to_string(registers) + " registers per thread, at most " +
                        std::to_string(*rule.max_registers) + " expected");
      }
      const std::int64_t shared =
          launch["static_smem"].get<std::int64_t>() + launch["dynamic_smem"].get<std::int64_t>();
      if (rule.max_shared_bytes && shared > *rule.max_shared_bytes) {
        found.push_back(std::to_string(shared) + " bytes of shared memory, at most " +
                        std::to_string(*rule.max_shared_bytes) + " expected");
      }
      for (std::string& problem : found) {
        // One line per distinct problem: a kernel launched 1,000 times the same way says it once.
        std::string text = kernel;
        text.append(": ").append(problem);
        if (std::find(wrong.begin(), wrong.end(), text) == wrong.end()) wrong.push_back(std::move(text));
      }
    }
    if (matched == 0 && rule.must_launch) {
      std::string observed;
      for (const auto& [kernel, count] : seen) {
        if (observed.size() > 2000) {
          observed += ", ...";
          break;
        }
        observed += (observed.empty() ? "" : ", ") + kernel + " x" + std::to_string(count);
      }
      wrong.push_back("no launch of a kernel matching \"" + rule.kernel +
                      "\"; observed: " + (observed.empty() ? "no kernel launches" : observed));
    }
    check.details.push_back({{"kernel", rule.kernel}, {"launches", matched}, {"problems", wrong}});
    problems.insert(problems.end(), wrong.begin(), wrong.end());
  }
  check.passed = problems.empty();
  if (check.passed) {
    check.message = std::to_string(launches.size()) + " launches of " + std::to_string(seen.size()) +
                    " kernels; " + std::to_string(expected.size()) + " expectations met";
  } else {
    for (std::size_t i = 0; i < problems.size() && i < 5; ++i) check.message += (i ? "; " : "") + problems[i];
    if (problems.size() > 5) check.message += "; and " + std::to_string(problems.size() - 5) + " more";
  }
  return check;
}

namespace {

// Where libkw_inject.so may be, in the order it is looked for.
std::vector<fs::path> inject_library_candidates() {
  if (const char* path = std::getenv("KW_INJECT_LIBRARY"); path != nullptr && *path != '\0') return {path};
  std::error_code ec;
  const fs::path dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return {};
  return {dir / "libkw_inject.so", dir / ".." / "lib" / "libkw_inject.so",
          dir / ".." / "kernels" / "inject" / "libkw_inject.so"};
}

}  // namespace

std::optional<fs::path> find_inject_library() {
  std::error_code ec;
  for (const fs::path& candidate : inject_library_candidates()) {
    if (fs::exists(candidate, ec)) return fs::weakly_canonical(candidate, ec);
  }
  return std::nullopt;
}

std::string inject_library_line() {
  if (const std::optional<fs::path> found = find_inject_library())
    return "launch recording: " + found->string();
  std::string looked;
  for (const fs::path& candidate : inject_library_candidates())
    looked += (looked.empty() ? "" : ", ") + candidate.lexically_normal().string();
  return "libkw_inject.so not found (looked for " + (looked.empty() ? std::string("nothing") : looked) +
         "; KW_INJECT_LIBRARY names it): launch_geometry cannot record launches, and no case is "
         "fingerprinted, "
         "so none is skipped as identical to its base";
}

}  // namespace kw::agent
