// The bench command line: lists cases, runs one stage over the selected cases
// (each case in its own child process unless --in-process), writes the stage
// and the cases' part of the run report as JSON, and prints progress.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "kernel_trace.hpp"
#include "kw/common/subprocess.hpp"
#include "stages.hpp"

namespace kwbench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kStages = {"load", "launch_geometry", "correctness", "quick_bench",
                                          "full_bench"};

struct Options {
  bool list = false;
  std::string stage;
  std::string case_glob = "*";
  std::string json_path;
  std::vector<std::string> libraries;
  std::vector<std::string> symbols;
  bool in_process = false;
  std::string child_case;  // internal: run exactly this case in this process
  double case_timeout = 600;
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

struct ChildResult {
  CaseOutcome outcome;
  std::string output;
};

// Runs this executable for one case with a timeout; the whole process group
// is killed when it runs out.
ChildResult run_case(const Options& options, const std::string& case_name, const std::string& self) {
  char path_template[] = "/tmp/kwbench-case-XXXXXX";
  int json_fd = mkstemp(path_template);
  if (json_fd < 0) throw Error("mkstemp failed");
  close(json_fd);
  std::string json_path = path_template;
  std::vector<std::string> argv = {self,
                                   "--stage",
                                   options.stage,
                                   "--child-case",
                                   case_name,
                                   "--json",
                                   json_path,
                                   "--seed",
                                   std::to_string(options.bench.seed),
                                   "--noise-target",
                                   std::to_string(options.bench.noise_target),
                                   "--max-seconds",
                                   std::to_string(options.bench.max_seconds),
                                   "--min-samples",
                                   std::to_string(options.bench.min_samples),
                                   "--max-samples",
                                   std::to_string(options.bench.max_samples)};
  kw::common::ChildSpec spec;
  spec.argv = argv;
  spec.timeout_s = options.case_timeout;
  spec.tail_bytes = 64 * 1024;
  kw::common::ChildOutcome child = kw::common::run_child(spec);
  ChildResult result;
  result.output = child.output_tail;

  std::ifstream in(json_path);
  json document;
  bool parsed = false;
  if (in) {
    try {
      in >> document;
      parsed = document.contains("case");
    } catch (const std::exception&) {
    }
  }
  std::remove(json_path.c_str());
  if (parsed) {
    result.outcome.status = document["result"]["status"];
    result.outcome.message = document["result"]["message"];
    result.outcome.details = document["result"].value("details", json::object());
    result.outcome.part = document["case"];
  } else {
    result.outcome.status = "failed";
    result.outcome.part = {{"name", case_name}};
    if (child.timed_out) {
      result.outcome.message =
          "timed out after " + std::to_string(static_cast<int>(options.case_timeout)) + " s";
    } else if (child.exit_code > 128) {
      result.outcome.message = std::string("crashed: ") + strsignal(child.exit_code - 128);
    } else {
      result.outcome.message = "exited " + std::to_string(child.exit_code) + " without a result";
    }
  }
  return result;
}

std::vector<std::unique_ptr<Case>> make_cases(const std::string& glob) {
  std::vector<std::unique_ptr<Case>> cases;
  for (auto& factory : Registry::instance().cases()) {
    std::unique_ptr<Case> c = factory();
    if (glob_match(glob, c->name())) cases.push_back(std::move(c));
  }
  return cases;
}

void write_json(const std::string& path, const json& document) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error("cannot write " + path);
  out << document.dump(2) << "\n";
}

int child_main(const Options& options) {
  json document;
  try {
    DeviceFacts device = probe_device();
    auto cases = make_cases(options.child_case);
    std::unique_ptr<Case> selected;
    for (auto& c : cases) {
      if (c->name() == options.child_case) selected = std::move(c);
    }
    if (!selected) throw Error("no case named " + options.child_case);
    CaseOutcome outcome = guarded(options.stage, *selected, device, options.bench);
    document = {
        {"result", {{"status", outcome.status}, {"message", outcome.message}, {"details", outcome.details}}},
        {"case", outcome.part}};
  } catch (const std::exception& error) {
    document = {{"result", {{"status", "failed"}, {"message", error.what()}}},
                {"case", {{"name", options.child_case}}}};
  }
  write_json(options.json_path, document);
  return 0;
}

int stage_main(const Options& options, const std::string& self) {
  auto started = Clock::now();
  json stage{{"name", options.stage},
             {"status", "passed"},
             {"message", ""},
             {"log_tail", ""},
             {"details", json::object()}};
  json document{{"stage", stage}, {"device", nullptr}, {"cases", json::array()}};
  auto finish = [&](int code) {
    document["stage"]["duration_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
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
    return finish(0);
  }
  document["device"] = device.report;
  log_line(options.stage + " started on " + device.report["name"].get<std::string>());

  if (options.stage == "load") {
    std::vector<LibraryInfo> libraries = Registry::instance().libraries();
    for (const std::string& path : options.libraries) libraries.push_back({path, options.symbols});
    CaseOutcome outcome;
    try {
      outcome = run_load(libraries, device);
    } catch (const std::exception& error) {
      outcome.status = "failed";
      outcome.message = error.what();
    }
    document["stage"]["status"] = outcome.status;
    document["stage"]["message"] = outcome.message;
    document["stage"]["details"] = outcome.details;
    return finish(outcome.status == "failed" ? 1 : 0);
  }

  auto cases = make_cases(options.case_glob);
  if (cases.empty()) {
    document["stage"]["status"] = "failed";
    document["stage"]["message"] = "no case matches \"" + options.case_glob + "\"";
    return finish(1);
  }
  std::vector<std::string> failures;
  std::string log_tail;
  json case_results = json::array();
  int passed = 0;
  for (auto& c : cases) {
    std::string name = c->name();
    log_line(options.stage + " " + name + " ...");
    auto case_started = Clock::now();
    CaseOutcome outcome;
    if (options.in_process) {
      outcome = guarded(options.stage, *c, device, options.bench);
    } else {
      ChildResult child = run_case(options, name, self);
      outcome = std::move(child.outcome);
      if (outcome.status == "failed") log_tail += "--- " + name + "\n" + tail(child.output, 4000);
    }
    double seconds = std::chrono::duration<double>(Clock::now() - case_started).count();
    log_line(options.stage + " " + name + " " + outcome.status + " (" + std::to_string(seconds).substr(0, 5) +
             " s): " + outcome.message);
    if (!outcome.part.contains("params")) outcome.part["params"] = c->params();
    document["cases"].push_back(outcome.part);
    case_results.push_back({{"name", name},
                            {"status", outcome.status},
                            {"message", outcome.message},
                            {"details", outcome.details}});
    if (outcome.status == "failed") failures.push_back(name + ": " + outcome.message);
    if (outcome.status == "passed") ++passed;
  }
  document["stage"]["details"]["cases"] = case_results;
  document["stage"]["log_tail"] = tail(log_tail, 16000);
  if (!failures.empty()) {
    document["stage"]["status"] = "failed";
    std::string message =
        std::to_string(failures.size()) + " of " + std::to_string(cases.size()) + " cases failed: ";
    for (std::size_t i = 0; i < failures.size() && i < 5; ++i) message += (i ? "; " : "") + failures[i];
    document["stage"]["message"] = message;
    return finish(1);
  }
  document["stage"]["message"] = std::to_string(passed) + " cases passed";
  return finish(0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"kernelwatch bench (kwbench harness)"};
  Options options;
  cli.add_flag("--list", options.list, "print the case names, one per line");
  cli.add_option("--stage", options.stage, "stage to run")->check(CLI::IsMember(kStages));
  cli.add_option("--case", options.case_glob, "glob over case names")->capture_default_str();
  cli.add_option("--json", options.json_path, "write the stage result and cases here");
  cli.add_option("--library", options.libraries, "load stage: a shared library to dlopen (RTLD_NOW)");
  cli.add_option("--symbol", options.symbols, "load stage: a symbol each --library must resolve");
  cli.add_flag("--in-process", options.in_process, "run all cases in this process (no fault isolation)");
  cli.add_option("--case-timeout", options.case_timeout, "seconds per case")->capture_default_str();
  cli.add_option("--seed", options.bench.seed, "seed of the random inputs")->capture_default_str();
  cli.add_option("--noise-target", options.bench.noise_target, "full_bench: stop at this relative noise")
      ->capture_default_str();
  cli.add_option("--max-seconds", options.bench.max_seconds, "full_bench: time cap per case")
      ->capture_default_str();
  cli.add_option("--min-samples", options.bench.min_samples)->capture_default_str();
  cli.add_option("--max-samples", options.bench.max_samples)->capture_default_str();
  cli.add_option("--child-case", options.child_case)->group("");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = cli.exit(error);
    return code == 0 ? 0 : 2;
  }
  try {
    if (options.list) {
      json names = json::array();
      for (auto& c : make_cases(options.case_glob)) {
        std::cout << c->name() << "\n";
        names.push_back({{"name", c->name()},
                         {"params", c->params()},
                         {"baselines", c->baselines()},
                         {"expected_launch", expected_launch_json(c->expected_launch())}});
      }
      write_json(options.json_path, {{"cases", names}});
      return 0;
    }
    if (options.stage.empty()) {
      std::cerr << "one of --list or --stage is required\n" << cli.help();
      return 2;
    }
    if (!options.child_case.empty()) return child_main(options);
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
