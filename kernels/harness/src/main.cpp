// The bench command line: lists cases, runs one stage over the selected cases
// and writes the stage and the cases' part of the run report as JSON.
//
// The cases of a stage run in one child process (CUDA, libraries and the
// process are set up once), which appends one JSON line per case as it goes.
// A crash, a timeout or a sticky CUDA error ends that child; the case it was
// running fails with the cause and a fresh child continues at the next case,
// so a faulting kernel only fails its own case. A full_bench invocation is one
// replicate of every selected case: fresh allocations and warm-up per case, in
// an order shuffled by --order-seed; the agent runs several and merges them.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "kernel_trace.hpp"
#include "kw/common/subprocess.hpp"
#include "stages.hpp"

namespace kwbench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// --stage: every stage after the build, or "preflight" (all before full_bench).
const std::vector<std::string> kStages = [] {
  std::vector<std::string> stages;
  for (const kw::common::StageRow& row : kw::common::kStageTable) {
    if (row.name > kw::common::StageName::build) stages.emplace_back(row.text);
  }
  stages.emplace_back("preflight");
  return stages;
}();

struct Options {
  bool list = false;
  std::string stage;
  std::string case_glob = "*";
  std::string case_list;  // a file of case names, one per line (instead of --case)
  std::string json_path;
  std::vector<std::string> libraries;
  std::vector<std::string> symbols;
  bool in_process = false;
  std::string child_cases;  // internal: run the cases named in this file in this process
  std::size_t preflight_stages = kPreflightCaseStages.size();  // internal: a child runs this many of them
  double case_timeout = 600;
  // preflight: seconds each per-case stage may take over all its cases
  std::map<std::string, double> stage_timeouts;
  std::uint64_t order_seed = 0;  // 0: registration order
  BenchOptions bench;
};

void log_line(const std::string& text) {
  std::cerr << "[kwbench] " << text << std::endl;
}

std::string tail(const std::string& text, std::size_t bytes) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

CaseOutcome run_stage_in_process(const std::string& stage, Case& c, const DeviceFacts& device,
                                 const BenchOptions& options) {
  if (stage == "launch_geometry") return run_launch_geometry(c, device, options);
  if (stage == "correctness") return run_correctness(c, device, options);
  if (stage == "quick_bench") return run_quick_bench(c, device, options);
  return run_full_bench(c, device, options);
}

// A case run in this process, any error turned into a failed outcome.
CaseOutcome guarded(const std::string& stage, Case& c, const DeviceFacts& device,
                    const BenchOptions& options) {
  try {
    return run_stage_in_process(stage, c, device, options);
  } catch (const std::exception& error) {
    CaseOutcome outcome;
    outcome.status = "failed";
    outcome.message = error.what();
    outcome.part = {{"name", c.name()}, {"params", c.params()}};
    return outcome;
  }
}

json outcome_line(const CaseOutcome& outcome, double seconds) {
  return {{"result",
           {{"status", outcome.status},
            {"message", outcome.message},
            {"details", outcome.details},
            {"seconds", seconds}}},
          {"case", outcome.part}};
}

CaseOutcome outcome_from_line(const json& line) {
  CaseOutcome outcome;
  outcome.status = line["result"]["status"];
  outcome.message = line["result"]["message"];
  outcome.details = line["result"].value("details", json::object());
  outcome.part = line["case"];
  return outcome;
}

// `globs`: one glob, or several separated by commas (any of them matches).
std::vector<std::unique_ptr<Case>> make_cases(const std::string& globs) {
  std::vector<std::string> patterns;
  std::stringstream split(globs);
  for (std::string pattern; std::getline(split, pattern, ',');) patterns.push_back(pattern);
  std::vector<std::unique_ptr<Case>> cases;
  for (auto& factory : Registry::instance().cases()) {
    std::unique_ptr<Case> c = factory();
    for (const std::string& pattern : patterns) {
      if (glob_match(pattern, c->name())) {
        cases.push_back(std::move(c));
        break;
      }
    }
  }
  return cases;
}

std::vector<std::string> read_names(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the case list " + path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

// The selected cases, in run order: --case-list's order, else registration
// order; shuffled when an order seed is given.
std::vector<std::unique_ptr<Case>> select_cases(const Options& options) {
  std::vector<std::unique_ptr<Case>> cases;
  if (!options.case_list.empty()) {
    std::map<std::string, std::unique_ptr<Case>> by_name;
    for (auto& c : make_cases("*")) by_name[c->name()] = std::move(c);
    for (const std::string& name : read_names(options.case_list)) {
      auto it = by_name.find(name);
      if (it == by_name.end())
        throw Error("--case-list names \"" + name + "\", which is no case of this bench");
      if (it->second) cases.push_back(std::move(it->second));
    }
  } else {
    cases = make_cases(options.case_glob);
  }
  if (options.stage == "quick_bench" || options.stage == "full_bench")
    std::erase_if(cases, [](const std::unique_ptr<Case>& c) { return !c->timed(); });
  if (options.order_seed != 0) {
    std::mt19937_64 rng(options.order_seed);
    std::shuffle(cases.begin(), cases.end(), rng);
  }
  return cases;
}

void write_json(const std::string& path, const json& document) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error("cannot write " + path);
  out << document.dump(2) << "\n";
}

void append_line(std::ofstream& out, const json& line) {
  out << line.dump() << "\n";
  out.flush();
}

// A cudaError that poisons the context: every later call fails with it, so
// the process cannot run another case.
bool context_is_broken() {
  cudaGetLastError();  // clears an error that is not sticky
  if (cudaDeviceSynchronize() == cudaSuccess) return false;
  cudaGetLastError();
  return cudaDeviceSynchronize() != cudaSuccess;
}

// A fatal signal in a child prints where it happened (the parent keeps the
// output tail in the stage's log), then ends the process as the signal would.
void print_backtrace_and_die(int signal_number) {
  const char* what = strsignal(signal_number);
  (void)!write(STDERR_FILENO, "[kwbench] fatal signal: ", 24);
  (void)!write(STDERR_FILENO, what, std::strlen(what));
  (void)!write(STDERR_FILENO, "\n", 1);
  void* frames[64];
  int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

// The stage a case's run starts with: a failure before any stage ran is its.
const std::string& first_stage(const Options& options) {
  return options.stage == "preflight" ? kPreflightCaseStages.front() : options.stage;
}

// The child: runs the named cases in order, one JSON line as each case's
// stage starts and ends and one as the case is finished; the per-case
// timeout is an alarm, whose default action ends the process, so the parent
// sees which case it was. A preflight child runs the case's stages on one
// setup of it, and after a failed stage only the stages up to it.
int child_main(const Options& options) {
  for (int fatal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(fatal, print_backtrace_and_die);
  std::ofstream out(options.json_path, std::ios::app);
  if (!out) return 3;
  DeviceFacts device;
  try {
    device = probe_device();
  } catch (const std::exception& error) {
    append_line(out, {{"fatal", error.what()}});
    return 3;
  }
  const bool preflight = options.stage == "preflight";
  std::size_t stages = options.preflight_stages;
  std::map<std::string, double> stage_left = options.stage_timeouts;
  std::set<std::string> announced;
  std::map<std::string, std::unique_ptr<Case>> by_name;
  for (auto& c : make_cases("*")) by_name[c->name()] = std::move(c);
  for (const std::string& name : read_names(options.child_cases)) {
    auto it = by_name.find(name);
    bool failed = false;
    auto started = Clock::now();
    auto on_start = [&](const std::string& stage) {
      started = Clock::now();
      append_line(out, {{"started", name}, {"stage", stage}});
      // The agent reports a stage as started on this line.
      if (preflight && announced.insert(stage).second) log_line("stage " + stage + " started");
      if (preflight) {
        // A stage of a case gets the case timeout, or what is left of its stage's.
        double seconds = options.case_timeout;
        if (auto left = stage_left.find(stage); left != stage_left.end())
          seconds = std::min(seconds, left->second);
        alarm(static_cast<unsigned>(std::ceil(std::max(1.0, seconds))));
      }
    };
    auto on_result = [&](const std::string& stage, const CaseOutcome& outcome) {
      double seconds = std::chrono::duration<double>(Clock::now() - started).count();
      if (auto left = stage_left.find(stage); left != stage_left.end()) left->second -= seconds;
      json line = outcome_line(outcome, seconds);
      line["stage"] = stage;
      append_line(out, line);
      log_line(stage + " " + name + " " + outcome.status + " (" + std::to_string(seconds).substr(0, 5) +
               " s): " + outcome.message);
      failed = failed || outcome.status == "failed";
    };
    if (it == by_name.end() || !it->second) {
      on_start(first_stage(options));
      CaseOutcome outcome;
      outcome.status = "failed";
      outcome.message = "no case named " + name;
      outcome.part = {{"name", name}};
      on_result(first_stage(options), outcome);
    } else {
      if (preflight) {
        run_preflight(
            *it->second, options.bench, stages, [&](std::size_t i) { on_start(kPreflightCaseStages[i]); },
            [&](std::size_t i, const CaseOutcome& outcome) {
              on_result(kPreflightCaseStages[i], outcome);
              if (outcome.status == "failed") stages = std::min(stages, i + 1);
            });
      } else {
        on_start(options.stage);
        alarm(static_cast<unsigned>(std::max(1.0, options.case_timeout)));
        on_result(options.stage, guarded(options.stage, *it->second, device, options.bench));
      }
      alarm(0);
      // Its handles and plans go with it, as when each case had a process:
      // dozens of live cuDNN handles in one process crashed cuDNN.
      it->second.reset();
    }
    append_line(out, {{"finished", name}});
    if (failed && context_is_broken()) return 4;
  }
  return 0;
}

std::string temp_path(const char* tag) {
  std::string pattern = std::string("/tmp/kwbench-") + tag + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  int fd = mkstemp(buffer.data());
  if (fd < 0) throw Error(std::string("mkstemp failed: ") + std::strerror(errno));
  close(fd);
  return buffer.data();
}

struct CaseRun {
  std::string stage;
  std::string name;
  CaseOutcome outcome;
  double seconds = 0;
  std::string output;  // the child's output tail, for a failed case
};

std::size_t preflight_index(const std::string& stage) {
  auto it = std::find(kPreflightCaseStages.begin(), kPreflightCaseStages.end(), stage);
  return static_cast<std::size_t>(it - kPreflightCaseStages.begin());
}

// The command line of a child that runs the cases listed in `list_path`,
// writing its lines to `lines_path`, with what each stage has left.
std::vector<std::string> child_argv(const Options& options, const std::string& self,
                                    const std::string& list_path, const std::string& lines_path,
                                    std::size_t preflight_stages,
                                    const std::map<std::string, double>& stage_left) {
  std::vector<std::string> argv = {self,
                                   "--stage",
                                   options.stage,
                                   "--child-cases",
                                   list_path,
                                   "--preflight-stages",
                                   std::to_string(preflight_stages),
                                   "--json",
                                   lines_path,
                                   "--case-timeout",
                                   std::to_string(options.case_timeout),
                                   "--seed",
                                   std::to_string(options.bench.seed),
                                   "--noise-target",
                                   std::to_string(options.bench.noise_target),
                                   "--max-seconds",
                                   std::to_string(options.bench.max_seconds),
                                   "--min-samples",
                                   std::to_string(options.bench.min_samples),
                                   "--max-samples",
                                   std::to_string(options.bench.max_samples),
                                   "--impls",
                                   options.bench.impls,
                                   "--order-offset",
                                   std::to_string(options.bench.order_offset),
                                   "--energy-seconds",
                                   std::to_string(options.bench.energy_seconds)};
  for (const auto& [stage, left] : stage_left)
    argv.insert(argv.end(), {"--stage-timeout", stage + "=" + std::to_string(std::max(0.0, left))});
  return argv;
}

// Why a child ended before its cases did; "" when the case already
// reported its own failure. `stage_out_of_time` when the stage that was
// running (`running_stage`, "" between cases) had spent its budget: the
// child's time less its reported stages' (`reported_seconds`).
std::string child_end_cause(const Options& options, const kw::common::ChildOutcome& child,
                            double reported_seconds, const std::map<std::string, double>& stage_left,
                            const std::string& running_stage, bool& stage_out_of_time) {
  if (child.timed_out || child.exit_code == 128 + SIGALRM) {
    if (auto left = stage_left.find(running_stage);
        left != stage_left.end() && left->second - (child.seconds - reported_seconds) <= 1) {
      stage_out_of_time = true;
      return "timed out: the " + running_stage + " stage's " +
             std::to_string(static_cast<int>(options.stage_timeouts.at(running_stage))) + " s ran out";
    }
    return "timed out after " + std::to_string(static_cast<int>(options.case_timeout)) + " s";
  }
  if (child.exit_code == 4) return "";  // the case failed and broke the CUDA context: already reported
  if (child.exit_code > 128) return std::string("crashed: ") + strsignal(child.exit_code - 128);
  return "the bench process " + child.describe() + " without a result";
}

// What a child wrote to its lines file: each case stage's result, the case
// it had started when it ended, how many cases it finished, and a fatal
// error that leaves nothing able to run.
struct ChildLines {
  std::vector<CaseRun> results;
  std::string started, started_stage, fatal;
  std::size_t finished = 0;
};

ChildLines read_child_lines(const std::string& lines_path, const std::string& stage,
                            const std::string& output_tail) {
  ChildLines lines;
  std::ifstream in(lines_path);
  for (std::string text; std::getline(in, text);) {
    json line;
    try {
      line = json::parse(text);
    } catch (const std::exception&) {
      break;  // a line cut short by the crash
    }
    if (line.contains("fatal")) {
      lines.fatal = line["fatal"];
    } else if (line.contains("started")) {
      lines.started = line["started"];
      lines.started_stage = line.value("stage", stage);
    } else if (line.contains("result")) {
      CaseRun run{line.value("stage", stage), lines.started, outcome_from_line(line),
                  line["result"].value("seconds", 0.0), ""};
      if (run.outcome.status == "failed") run.output = output_tail;
      lines.results.push_back(std::move(run));
      lines.started.clear();
    } else if (line.contains("finished")) {
      ++lines.finished;
    }
  }
  return lines;
}

// Runs `names` in child processes, a fresh one after each crash, timeout or
// broken context, continuing at the case after the one that ended it.
std::vector<CaseRun> run_in_children(const Options& options, const std::vector<std::string>& names,
                                     const std::string& self) {
  std::vector<CaseRun> runs;
  std::size_t next = 0;
  std::size_t preflight_stages = options.preflight_stages;
  std::map<std::string, double> stage_left = options.stage_timeouts;
  auto record = [&](CaseRun run) {
    if (run.outcome.status == "failed" && options.stage == "preflight")
      preflight_stages = std::min(preflight_stages, preflight_index(run.stage) + 1);
    if (auto left = stage_left.find(run.stage); left != stage_left.end()) left->second -= run.seconds;
    runs.push_back(std::move(run));
  };
  std::string list_path = temp_path("cases"), lines_path = temp_path("lines");
  while (next < names.size()) {
    {
      std::ofstream list(list_path, std::ios::trunc);
      for (std::size_t i = next; i < names.size(); ++i) list << names[i] << "\n";
    }
    std::ofstream(lines_path, std::ios::trunc).close();
    std::vector<std::string> argv =
        child_argv(options, self, list_path, lines_path, preflight_stages, stage_left);
    const std::size_t runs_before = runs.size();
    kw::common::ChildSpec spec;
    spec.argv = argv;
    // The per-case alarm ends a hung case; this bounds a child that hangs
    // outside one (at start-up or teardown).
    spec.timeout_s = options.case_timeout * static_cast<double>(names.size() - next + 1) + 60;
    spec.tail_bytes = std::size_t{64} * 1024;
    spec.echo = true;
    kw::common::ChildOutcome child = kw::common::run_child(spec);

    ChildLines lines = read_child_lines(lines_path, options.stage, child.output_tail);
    for (CaseRun& run : lines.results) record(std::move(run));
    const std::string& started = lines.started;
    const std::string& started_stage = lines.started_stage;
    const std::string& fatal = lines.fatal;
    const std::size_t finished = lines.finished;
    next += finished;
    if (next >= names.size()) break;
    if (!fatal.empty()) {
      // Nothing can run here (no device, no context): every remaining case fails alike.
      for (; next < names.size(); ++next) {
        CaseOutcome outcome;
        outcome.status = "failed";
        outcome.message = fatal;
        outcome.part = {{"name", names[next]}};
        record({first_stage(options), names[next], outcome, 0, child.output_tail});
      }
      break;
    }
    double reported = 0;
    for (std::size_t i = runs_before; i < runs.size(); ++i) reported += runs[i].seconds;
    bool stage_out_of_time = false;
    const std::string cause = child_end_cause(options, child, reported, stage_left,
                                              started.empty() ? "" : started_stage, stage_out_of_time);
    if (!cause.empty()) {
      // The case's stage that was running when the child ended fails with
      // the cause; ended between cases, the next case fails. Its stages that
      // did not run are not run.
      CaseOutcome outcome;
      outcome.status = "failed";
      outcome.message = cause;
      if (!started.empty()) {
        outcome.part = {{"name", started}};
        record({started_stage, started, outcome, 0, child.output_tail});
      } else if (!runs.empty() && runs.back().name == names[next]) {
        // After its last result, in its teardown: that stage fails.
        CaseRun last = std::move(runs.back());
        runs.pop_back();
        last.outcome.status = "failed";
        last.outcome.message += (last.outcome.message.empty() ? "" : "; then ") + cause;
        last.output = child.output_tail;
        record(std::move(last));
      } else {
        outcome.part = {{"name", names[next]}};
        record({first_stage(options), names[next], outcome, 0, child.output_tail});
      }
      ++next;
    }
    if (stage_out_of_time) break;  // the cases after it are not run
    log_line(options.stage + ": a fresh process continues at case " + std::to_string(next + 1) + " of " +
             std::to_string(names.size()));
  }
  std::remove(list_path.c_str());
  std::remove(lines_path.c_str());
  return runs;
}

// A stage's result from its cases' runs; the cases' parts go to `cases`.
json stage_of_runs(const std::string& name, std::vector<CaseRun>& runs,
                   const std::map<std::string, Case*>& by_name, bool log_each, json& cases) {
  std::vector<std::string> failures;
  std::string log_tail;
  json case_results = json::array();
  int passed = 0;
  for (CaseRun& run : runs) {
    CaseOutcome& outcome = run.outcome;
    if (log_each)
      log_line(name + " " + run.name + " " + outcome.status + " (" +
               std::to_string(run.seconds).substr(0, 5) + " s): " + outcome.message);
    auto known = by_name.find(run.name);
    if (!outcome.part.contains("params") && known != by_name.end())
      outcome.part["params"] = known->second->params();
    cases.push_back(outcome.part);
    case_results.push_back({{"name", run.name},
                            {"status", outcome.status},
                            {"message", outcome.message},
                            {"seconds", run.seconds},
                            {"details", outcome.details}});
    if (outcome.status == "failed") {
      failures.push_back(run.name + ": " + outcome.message);
      if (!run.output.empty()) log_tail += "--- " + run.name + "\n" + tail(run.output, 4000);
    }
    if (outcome.status == "passed") ++passed;
  }
  json stage{{"name", name},
             {"status", failures.empty() ? "passed" : "failed"},
             {"message", std::to_string(passed) + " cases passed"},
             {"log_tail", tail(log_tail, 16000)},
             {"details", {{"cases", case_results}}}};
  if (!failures.empty()) {
    std::string message =
        std::to_string(failures.size()) + " of " + std::to_string(runs.size()) + " cases failed: ";
    for (std::size_t i = 0; i < failures.size() && i < 5; ++i) message += (i ? "; " : "") + failures[i];
    stage["message"] = message;
  }
  return stage;
}

json empty_stage(const std::string& name) {
  return {
      {"name", name}, {"status", "passed"}, {"message", ""}, {"log_tail", ""}, {"details", json::object()}};
}

json load_stage(const Options& options, const DeviceFacts& device) {
  json stage = empty_stage("load");
  std::vector<LibraryInfo> libraries = Registry::instance().libraries();
  for (const std::string& path : options.libraries) libraries.push_back({path, options.symbols});
  CaseOutcome outcome;
  try {
    outcome = run_load(libraries, device);
  } catch (const std::exception& error) {
    outcome.status = "failed";
    outcome.message = error.what();
  }
  stage["status"] = outcome.status;
  stage["message"] = outcome.message;
  stage["details"] = outcome.details;
  return stage;
}

double seconds_since(Clock::time_point started) {
  return std::chrono::duration<double>(Clock::now() - started).count();
}

std::int64_t milliseconds(double seconds) {
  return static_cast<std::int64_t>(seconds * 1000);
}

// --stage preflight: load, then launch_geometry, correctness and quick_bench
// of every case in one process (a fresh one after a faulting case), each
// case set up once for all three; a stage's failure skips the stages after
// it. Writes {"device", "preflight": [{"stage", "cases"}, ...]}, one entry
// per stage that ran.
int preflight_main(const Options& options, const DeviceFacts& device, const std::string& self) {
  json document{{"device", device.report}, {"preflight", json::array()}};
  auto finish = [&](int code) {
    write_json(options.json_path, document);
    for (const json& entry : document["preflight"])
      log_line(entry["stage"]["name"].get<std::string>() + " " + entry["stage"]["status"].get<std::string>() +
               ": " + entry["stage"]["message"].get<std::string>());
    return code;
  };
  auto started = Clock::now();
  json load = load_stage(options, device);
  load["duration_ms"] = milliseconds(seconds_since(started));
  document["preflight"].push_back({{"stage", load}, {"cases", json::array()}});
  if (load["status"] == "failed") return finish(1);

  auto cases = select_cases(options);
  if (cases.empty()) {
    json stage = empty_stage(kPreflightCaseStages.front());
    stage["status"] = "failed";
    stage["message"] = "no case matches \"" + options.case_glob + "\"";
    document["preflight"].push_back({{"stage", stage}, {"cases", json::array()}});
    return finish(1);
  }
  std::map<std::string, Case*> by_name;
  std::vector<std::string> names;
  for (auto& c : cases) {
    by_name[c->name()] = c.get();
    names.push_back(c->name());
  }
  started = Clock::now();
  std::vector<CaseRun> runs;
  if (options.in_process) {
    std::size_t stages = options.preflight_stages;
    for (auto& c : cases) {
      auto case_started = Clock::now();
      run_preflight(
          *c, options.bench, stages, [&](std::size_t) { case_started = Clock::now(); },
          [&](std::size_t i, const CaseOutcome& outcome) {
            runs.push_back({kPreflightCaseStages[i], c->name(), outcome, seconds_since(case_started), ""});
            if (outcome.status == "failed") stages = std::min(stages, i + 1);
          });
    }
  } else {
    runs = run_in_children(options, names, self);
  }
  // The processes' start-up and the cases' setup count to the first stage.
  double unaccounted = seconds_since(started);
  int code = 0;
  for (const std::string& name : kPreflightCaseStages) {
    std::vector<CaseRun> of_stage;
    for (CaseRun& run : runs)
      if (run.stage == name) of_stage.push_back(run);
    if (of_stage.empty()) break;  // an earlier stage failed
    json entry{{"cases", json::array()}};
    entry["stage"] = stage_of_runs(name, of_stage, by_name, options.in_process, entry["cases"]);
    double seconds = 0;
    for (const CaseRun& run : of_stage) seconds += run.seconds;
    entry["stage"]["duration_ms"] = milliseconds(seconds);
    unaccounted -= seconds;
    document["preflight"].push_back(entry);
    // A failed stage ends the preflight: what a later stage did for the
    // cases before the failing one is no stage's result.
    if (entry["stage"]["status"] == "failed") {
      code = 1;
      break;
    }
  }
  if (document["preflight"].size() > 1) {
    json& first = document["preflight"][1]["stage"];
    first["duration_ms"] =
        first["duration_ms"].get<std::int64_t>() + milliseconds(std::max(0.0, unaccounted));
  }
  return finish(code);
}

int stage_main(const Options& options, const std::string& self) {
  auto started = Clock::now();
  json document{{"stage", empty_stage(options.stage)}, {"device", nullptr}, {"cases", json::array()}};
  auto finish = [&](int code) {
    document["stage"]["duration_ms"] = milliseconds(seconds_since(started));
    write_json(options.json_path, document);
    log_line(options.stage + " " + document["stage"]["status"].get<std::string>() + ": " +
             document["stage"]["message"].get<std::string>());
    return code;
  };

  DeviceFacts device;
  try {
    device = probe_device();
  } catch (const Error& error) {
    document["stage"]["status"] = "skipped";
    document["stage"]["message"] = error.what();
    if (options.stage == "preflight") {
      document = {{"device", nullptr},
                  {"preflight", {{{"stage", document["stage"]}, {"cases", json::array()}}}}};
      document["preflight"][0]["stage"]["name"] = "load";
      write_json(options.json_path, document);
      return 0;
    }
    return finish(0);
  }
  document["device"] = device.report;
  log_line(options.stage + " started on " + device.report["name"].get<std::string>());
  if (options.stage == "preflight") return preflight_main(options, device, self);

  if (options.stage == "load") {
    document["stage"] = load_stage(options, device);
    return finish(document["stage"]["status"] == "failed" ? 1 : 0);
  }

  auto cases = select_cases(options);
  if (cases.empty()) {
    document["stage"]["status"] = "failed";
    document["stage"]["message"] = "no case matches \"" + options.case_glob + "\"";
    return finish(1);
  }
  std::vector<CaseRun> runs;
  if (options.in_process) {
    for (auto& c : cases) {
      log_line(options.stage + " " + c->name() + " ...");
      auto case_started = Clock::now();
      CaseOutcome outcome = guarded(options.stage, *c, device, options.bench);
      runs.push_back({options.stage, c->name(), std::move(outcome), seconds_since(case_started), ""});
    }
  } else {
    std::vector<std::string> names;
    for (auto& c : cases) names.push_back(c->name());
    runs = run_in_children(options, names, self);
  }

  std::map<std::string, Case*> by_name;
  for (auto& c : cases) by_name[c->name()] = c.get();
  document["stage"] = stage_of_runs(options.stage, runs, by_name, options.in_process, document["cases"]);
  if (options.order_seed != 0) document["stage"]["details"]["order_seed"] = options.order_seed;
  return finish(document["stage"]["status"] == "failed" ? 1 : 0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kernelwatch bench (kwbench harness)"};
  Options options;
  cli.add_flag("--list", options.list, "print the case names, one per line");
  cli.add_option("--stage", options.stage,
                 "stage to run; preflight: load, launch_geometry, correctness and quick_bench in one go")
      ->check(CLI::IsMember(kStages));
  cli.add_option("--case", options.case_glob, "glob over case names (several: comma-separated)")
      ->capture_default_str();
  cli.add_option("--case-list", options.case_list, "a file naming the cases to run, one per line, in order");
  cli.add_option("--json", options.json_path, "write the stage result and cases here");
  cli.add_option("--library", options.libraries, "load stage: a shared library to dlopen (RTLD_NOW)");
  cli.add_option("--symbol", options.symbols, "load stage: a symbol each --library must resolve");
  cli.add_flag("--in-process", options.in_process, "run all cases in this process (no fault isolation)");
  cli.add_option("--case-timeout", options.case_timeout, "seconds per case")->capture_default_str();
  cli.add_option("--seed", options.bench.seed, "seed of the random inputs")->capture_default_str();
  cli.add_option("--order-seed", options.order_seed,
                 "shuffle the case order with this seed, and rotate which implementation goes first (0: as "
                 "registered)")
      ->capture_default_str();
  cli.add_option("--noise-target", options.bench.noise_target, "full_bench: stop at this relative noise")
      ->capture_default_str();
  cli.add_option("--max-seconds", options.bench.max_seconds, "full_bench: time cap per case")
      ->capture_default_str();
  cli.add_option("--energy-seconds", options.bench.energy_seconds,
                 "full_bench: run each implementation back to back this long after its timed rounds and "
                 "report joules per iteration from NVML's energy counter (0: no energy)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cli.add_option("--min-samples", options.bench.min_samples)->capture_default_str();
  cli.add_option("--max-samples", options.bench.max_samples)->capture_default_str();
  cli.add_option("--impls", options.bench.impls,
                 "full_bench: glob over the implementations to time (candidate, baseline:NAME)")
      ->capture_default_str();
  cli.add_option("--child-cases", options.child_cases)->group("");
  cli.add_option("--preflight-stages", options.preflight_stages)->group("");
  std::vector<std::string> stage_timeouts;
  cli.add_option("--stage-timeout", stage_timeouts,
                 "preflight: STAGE=SECONDS, what a per-case stage may take over all its cases")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cli.add_option("--order-offset", options.bench.order_offset)->group("");
  // A bench's own arguments (kernelwatch.json) come first and the agent's
  // after them: the last value of an option wins.
  for (CLI::Option* option : cli.get_options()) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = cli.exit(error);
    return code == 0 ? 0 : 2;
  }
  if (options.order_seed != 0 && options.bench.order_offset == 0)
    options.bench.order_offset = static_cast<unsigned>(options.order_seed % 7919);
  for (const std::string& entry : stage_timeouts) {
    std::size_t eq = entry.find('=');
    double seconds = eq == std::string::npos ? -1 : std::strtod(entry.c_str() + eq + 1, nullptr);
    if (eq == std::string::npos || preflight_index(entry.substr(0, eq)) == kPreflightCaseStages.size() ||
        !(seconds >= 0)) {
      std::string stages;
      for (const std::string& stage : kPreflightCaseStages) stages += (stages.empty() ? "" : ", ") + stage;
      std::cerr << "--stage-timeout: expected STAGE=SECONDS with STAGE one of " << stages << ", got \""
                << entry << "\"\n";
      return 2;
    }
    options.stage_timeouts[entry.substr(0, eq)] = seconds;
  }
  try {
    if (options.list) {
      json names = json::array();
      for (auto& c : make_cases(options.case_glob)) {
        std::cout << c->name() << "\n";
        names.push_back({{"name", c->name()},
                         {"params", c->params()},
                         {"baselines", c->baselines()},
                         {"timed", c->timed()},
                         {"expected_launch", expected_launch_json(c->expected_launch())}});
      }
      write_json(options.json_path, {{"cases", names}});
      return 0;
    }
    if (options.stage.empty()) {
      std::cerr << "one of --list or --stage is required\n" << cli.help();
      return 2;
    }
    if (!options.child_cases.empty()) return child_main(options);
    char self[4096] = {};
    ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0) throw Error("cannot resolve /proc/self/exe");
    return stage_main(options, std::string(self, static_cast<std::size_t>(length)));
  } catch (const std::exception& error) {
    std::cerr << "kwbench: " << error.what() << "\n";
    return 2;
  }
}

}  // namespace kwbench
