// kwbench CPU TEST DOUBLE: a CPU program that speaks the kwbench command line
// (--list, --stage S --json FILE --case GLOB | --case-list FILE, --impls GLOB)
// so the agent and the CI gate can be tested end to end on machines without
// a GPU. It times nothing real: its samples are drawn log-normal around fixed
// case times, and, as a real GPU process does, each invocation (a replicate)
// sits at a level of its own: 0.2% between processes, 0.5% within one. The
// between-process spread is kept well under the 1% threshold: at 0.5% an
// unchanged commit was flagged now and then (the run's 1% false-alarm
// allowance; CI of 921acca), and the e2e suite judges a few dozen of them.
//
// Behaviour comes from kwbench-fake.json in the working directory (the
// checkout), so a commit can change it:
//   {"slowdown": 1.10, "slow_cases": ["fake.scale/n1m"], "fail_stage": "launch_geometry",
//    "sleep_stage": "full_bench", "sleep_seconds": 3, "no_preflight": true}
// ("slow_cases": the cases the slowdown applies to; absent: every case)
// and sleeping happens only while the file named by KW_FAKE_SLEEP_FILE exists.
// Each invocation's --stage is appended to the file KW_FAKE_CALLS names.
//
// It stands in for libkw_inject.so too: where KW_INJECT_OUT is set, its
// launch_geometry (and preflight) writes what the injection library would,
// a module record with each kernel's code digest and the files it mapped.
// "kernel_code": {"CASE": "v2"} changes one case's kernel's code (each case
// launches its own kernel), as its slowdown does; "host_files": ["build/libx.so"] are mapped from
// the checkout (a real ELF file there, or the record is incomplete).
// --stage preflight writes load, launch_geometry, correctness and
// quick_bench in one document, up to the first failed one, as kwbench does;
// "no_preflight" makes it refuse that stage as a kwbench older than it does.
#include <fnmatch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

// The kwbench command line as the test double reads it.
struct Arguments {
  std::string stage, json_path, glob = "*", case_list, impls = "*";
  bool list = false;
  std::map<std::string, double> stage_timeouts;  // preflight, as kwbench keeps them
  std::size_t preflight_stages = 3;              // of the per-case ones, as kwbench's --preflight-stages
  std::string case_prefix;                       // before every case's name: a second bench's cases
};

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--list")
      args.list = true;
    else if (arg == "--stage" && i + 1 < argc)
      args.stage = argv[++i];
    else if (arg == "--json" && i + 1 < argc)
      args.json_path = argv[++i];
    else if (arg == "--case" && i + 1 < argc)
      args.glob = argv[++i];
    else if (arg == "--case-list" && i + 1 < argc)
      args.case_list = argv[++i];
    else if (arg == "--impls" && i + 1 < argc)
      args.impls = argv[++i];
    else if (arg == "--case-prefix" && i + 1 < argc)
      args.case_prefix = argv[++i];
    else if (arg == "--preflight-stages" && i + 1 < argc)
      args.preflight_stages = std::stoul(argv[++i]);
    else if (arg == "--stage-timeout" && i + 1 < argc) {
      std::string entry = argv[++i];
      args.stage_timeouts[entry.substr(0, entry.find('='))] = std::stod(entry.substr(entry.find('=') + 1));
    } else if ((arg == "--library" || arg == "--symbol") && i + 1 < argc)
      ++i;
  }
  return args;
}

// Two cases whose stages pass, fail, sleep or run slower as the working
// directory's kwbench-fake.json says.
struct FakeBench {
  Arguments args;
  json behaviour = json::object();
  std::vector<std::pair<std::string, double>> cases = {{"fake.scale/n1m", 20000},
                                                       {"fake.scale/n16m", 250000}};
  std::mt19937_64 rng{
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  std::normal_distribution<double> noise{0, 0.005};
  double process_level = std::exp(std::normal_distribution<double>(0, 0.002)(rng));

  double slowdown_of(const std::string& name) const {
    const double slowdown = behaviour.value("slowdown", 1.0);
    if (!behaviour.contains("slow_cases")) return slowdown;
    for (const json& slow : behaviour["slow_cases"]) {
      if (slow.get<std::string>() == name) return slowdown;
    }
    return 1.0;
  }

  bool selected(const std::string& name) const {
    if (args.case_list.empty()) return fnmatch(args.glob.c_str(), name.c_str(), 0) == 0;
    std::ifstream in(args.case_list);
    for (std::string line; std::getline(in, line);) {
      if (line == name) return true;
    }
    return false;
  }

  int list() const {
    json listed = json::array();
    for (const auto& [name, _] : cases) {
      if (!selected(name)) continue;
      std::cout << name << "\n";
      listed.push_back({{"name", name}, {"baselines", {"memcpy"}}});
    }
    if (!args.json_path.empty()) std::ofstream(args.json_path) << json{{"cases", listed}}.dump();
    return 0;
  }

  // Sleeps where kwbench-fake.json says, while KW_FAKE_SLEEP_FILE exists
  // (a test ends the sleep by removing it) and at most the stage's timeout;
  // true when that ran out.
  bool sleep_in(const std::string& stage_name) {
    if (behaviour.value("sleep_stage", "") != stage_name) return false;
    const char* marker = std::getenv("KW_FAKE_SLEEP_FILE");
    if (marker == nullptr || !std::filesystem::exists(marker)) return false;
    std::cerr << "fake bench: sleeping in " << stage_name << std::endl;
    double seconds = behaviour.value("sleep_seconds", 1.0);
    bool timed_out = false;
    if (auto limit = args.stage_timeouts.find(stage_name);
        limit != args.stage_timeouts.end() && limit->second < seconds) {
      seconds = limit->second;
      timed_out = true;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::filesystem::exists(marker) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return timed_out && std::filesystem::exists(marker);
  }

  json measurements_of(const std::string& name, double base) {
    json measurements = json::array();
    for (const auto& [impl, center] : {std::pair{std::string("candidate"), base * slowdown_of(name)},
                                       std::pair{std::string("baseline:memcpy"), base * 0.8}}) {
      if (fnmatch(args.impls.c_str(), impl.c_str(), 0) != 0) continue;
      std::vector<double> samples;
      for (int i = 0; i < 30; ++i) samples.push_back(center * process_level * std::exp(noise(rng)));
      std::vector<double> sorted = samples;
      std::sort(sorted.begin(), sorted.end());
      double median = sorted[14] + 0.5 * (sorted[15] - sorted[14]);
      measurements.push_back({{"impl", impl}, {"samples_ns", samples}, {"median_ns", median}});
    }
    return measurements;
  }

  json case_json(const std::string& stage_name, const std::string& name, double base, bool fail) {
    json c{{"name", name}, {"params", {{"harness", "fake"}}}};
    if (stage_name == "launch_geometry") {
      int block = fail ? 128 : 384;
      c["expected_launch"] = {{"kernel_pattern", "fake_kernel*"}, {"block", {384, 1, 1}}};
      c["launches"] = json::array({{{"kernel", kernel_of(name)},
                                    {"grid", {132, 1, 1}},
                                    {"block", {block, 1, 1}},
                                    {"registers", 32},
                                    {"static_smem", 0},
                                    {"dynamic_smem", 0}}});
    } else if (stage_name == "correctness") {
      c["correctness"] = {{"passed", !fail},
                          {"rel_l2_err", fail ? 0.5 : 1e-6},
                          {"max_abs_err", 1e-6},
                          {"tolerance", 1e-5},
                          {"nonfinite", 0}};
    } else if (stage_name == "full_bench") {
      c["measurements"] = measurements_of(name, base);
    }
    return c;
  }

  static std::string kernel_of(const std::string& name) {
    return "fake_kernel_" + name.substr(name.rfind('/') + 1) + "(float*)";
  }

  // libkw_inject.so's records of this process: one module with every case's
  // kernel, and the files mapped.
  void write_inject_records() const {
    const char* dir = std::getenv("KW_INJECT_OUT");
    if (dir == nullptr) return;
    json kernels = json::object();
    const json code = behaviour.value("kernel_code", json::object());
    for (const auto& [name, _] : cases) {
      // A slower case runs other code.
      const std::string version =
          code.value(name, std::string("v1")) + "@" + std::to_string(slowdown_of(name));
      char digest[65];
      std::snprintf(digest, sizeof digest, "%016zx%016zx%016zx%016zx", std::hash<std::string>{}(name),
                    std::hash<std::string>{}(version), std::hash<std::string>{}(name + version),
                    std::size_t{0});
      kernels[kernel_of(name)] = digest;
    }
    json maps = json::array();
    for (const json& file : behaviour.value("host_files", json::array()))
      maps.push_back((std::filesystem::current_path() / file.get<std::string>()).string());
    std::ofstream out(std::string(dir) + "/launches-" + std::to_string(getpid()) + ".jsonl");
    out << json{{"start", {{"pid", getpid()}, {"exe", "kw-fake-kwbench"}}}}.dump() << "\n"
        << json{{"module", {{"format", "cubin"}, {"image", std::string(64, 'f')}, {"kernels", kernels}}}}
               .dump()
        << "\n"
        << json{{"maps", maps}}.dump() << "\n"
        << json{{"end", {{"pid", getpid()}, {"launches", 0}, {"dropped", 0}}}}.dump() << "\n";
  }

  // One stage's {"stage", "cases"}.
  json run_stage(const std::string& stage_name) {
    if (stage_name == "launch_geometry") write_inject_records();
    if (args.stage == "preflight" && stage_name != "load")
      std::cerr << "[kwbench] stage " << stage_name << " started\n";
    const bool timed_out = sleep_in(stage_name);
    bool fail = timed_out || behaviour.value("fail_stage", "") == stage_name;
    std::string message = fail ? "injected failure of the test double" : "test double: all cases passed";
    if (timed_out)
      message = "1 of 1 cases failed: fake.scale/n1m: timed out: the " + stage_name + " stage's " +
                std::to_string(static_cast<int>(args.stage_timeouts[stage_name])) + " s ran out";
    if (fail && stage_name == "launch_geometry")
      message = "fake.scale/n1m: block: expected (384,1,1), observed (128,1,1)";
    json out{{"stage",
              {{"name", stage_name},
               {"status", fail ? "failed" : "passed"},
               {"message", message},
               {"log_tail", ""},
               {"details", json::object()},
               {"duration_ms", 5}}},
             {"cases", json::array()}};
    for (const auto& [name, base] : cases) {
      if (!selected(name) || stage_name == "load") continue;
      out["cases"].push_back(case_json(stage_name, name, base, fail));
    }
    out["stage"]["details"]["cases_run"] = out["cases"].size();
    std::cerr << "[fake kwbench] " << stage_name << " " << out["stage"]["status"].get<std::string>()
              << std::endl;
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  FakeBench bench;
  bench.args = parse_arguments(argc, argv);
  for (auto& [name, _] : bench.cases) name = bench.args.case_prefix + name;
  const Arguments& args = bench.args;
  if (const char* calls = std::getenv("KW_FAKE_CALLS"))
    std::ofstream(calls, std::ios::app) << args.stage << "\n";
  if (std::ifstream in("kwbench-fake.json"); in) bench.behaviour = json::parse(in);
  if (args.list) return bench.list();
  const json device{{"name", "kwbench CPU test double"},
                    {"compute_capability", "9.0"},
                    {"memory_bytes", 1LL << 34},
                    {"sm_count", 1},
                    {"l2_bytes", 0}};
  // "no_device": output that names no device, as Google Benchmark's does.
  json out = bench.behaviour.value("no_device", false) ? json::object() : json{{"device", device}};
  bool fail = false;
  if (args.stage == "preflight") {
    if (bench.behaviour.value("no_preflight", false)) {
      std::cerr << "--stage: preflight not in {load,launch_geometry,correctness,quick_bench,full_bench}\n";
      return 2;
    }
    out["preflight"] = json::array();
    const std::vector<const char*> stages = {"load", "launch_geometry", "correctness", "quick_bench"};
    for (std::size_t i = 0; i <= args.preflight_stages && i < stages.size(); ++i) {
      out["preflight"].push_back(bench.run_stage(stages[i]));
      fail = out["preflight"].back()["stage"]["status"] == "failed";
      if (fail) break;
    }
  } else {
    json document = bench.run_stage(args.stage);
    out["stage"] = document["stage"];
    out["cases"] = document["cases"];
    fail = out["stage"]["status"] == "failed";
  }
  if (!args.json_path.empty()) std::ofstream(args.json_path) << out.dump();
  return fail ? 1 : 0;
}
