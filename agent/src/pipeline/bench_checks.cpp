#include "pipeline/bench_checks.hpp"

#include <unistd.h>

#include <sstream>

#include "host/gpu_info.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/subprocess.hpp"
#include "pipeline/fingerprint.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/python_harness.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using common::ChildOutcome;
using common::ChildSpec;
using common::run_child;
using common::StageName;
using nlohmann::json;

fs::path temp_json(const std::string& tag) {
  char pattern[] = "/tmp/kw-stage-XXXXXX";
  int fd = mkstemp(pattern);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  fs::path path = std::string(pattern) + "-" + tag + ".json";
  fs::rename(pattern, path);
  return path;
}

// One short pass of the bench with libkw_inject.so in its processes; what
// they launched goes to `observed`.
ChildOutcome run_launch_pass(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
                             const PipelineOptions& options, const fs::path& library,
                             InjectedLaunches& observed) {
  const fs::path records = temp_json("launches");
  fs::remove(records);
  fs::create_directories(records);
  ChildSpec spec;
  spec.argv = {(options.checkout / bench.path).string()};
  const std::vector<std::string> pass =
      bench.launch_args.empty() ? adapter.one_pass_args({bench, config, options.checkout, *options.stop})
                                : bench.launch_args;
  spec.argv.insert(spec.argv.end(), pass.begin(), pass.end());
  spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
  spec.cwd = options.checkout;
  spec.env = {{"CUDA_INJECTION64_PATH", library.string()}, {"KW_INJECT_OUT", records.string()}};
  spec.timeout_s = config.timeout_for(StageName::launch_geometry);
  ChildOutcome outcome = run_child(spec, *options.stop);
  observed = read_injected_launches(records);
  std::error_code ec;
  fs::remove_all(records, ec);
  return outcome;
}

// launch_geometry of a bench of another harness: one short pass with
// libkw_inject.so in its processes, held against kernelwatch.json's
// `launches`.
BenchResult run_injected_launches(const BenchAdapter& adapter, const BenchConfig& bench,
                                  const RepoConfig& config, const PipelineOptions& options,
                                  bool for_fingerprints) {
  BenchResult result;
  if (bench.launches.empty() && !for_fingerprints) {
    result.status = "skipped";
    result.message = bench.name + ": no launch expectations (kernelwatch.json benches[].launches)";
    return result;
  }
  const std::optional<fs::path> library = find_inject_library();
  if (!library) {
    result.status = "failed";
    result.message = bench.name +
                     ": libkw_inject.so not found (beside kw, in ../lib, or KW_INJECT_LIBRARY), so its "
                     "launch expectations cannot be checked";
    return result;
  }
  InjectedLaunches observed;
  const ChildOutcome outcome = run_launch_pass(adapter, bench, config, options, *library, observed);
  result.seconds = outcome.seconds;
  if (!observed.refused.empty()) {
    // The bench's own error names no limit; the record does.
    result.status = "failed";
    result.message = bench.name + ": " + observed.refused.front();
    result.log_tail = outcome.output_tail;
    return result;
  }
  if (!outcome.ok()) {
    result.status = "failed";
    result.message = bench.name + " (its launch pass, " + adapter.harness() + "): " + outcome.describe();
    result.log_tail = outcome.output_tail;
    return result;
  }
  LaunchCheck check = check_launches(bench.launches, observed.launches);
  result.details = {{"expectations", check.details},
                    {"processes", observed.processes},
                    {"launches", observed.launches.size()},
                    {"library", library->string()}};
  attach_fingerprints(result, observed,
                      {options.checkout, adapter.harness(), bench.args, host_gpu_device(), CodeRecords{}});
  if (!observed.problems.empty()) {
    // An incomplete record could hide the launch that breaks an expectation.
    result.status = "failed";
    result.message = bench.name + ": the launch records are incomplete: " + observed.problems.front();
    result.log_tail = outcome.output_tail;
    return result;
  }
  result.status = check.passed ? "passed" : "failed";
  result.message = bench.name + ": " + check.message;
  if (!check.passed) result.log_tail = outcome.output_tail;
  return result;
}

std::string problems_message(const std::string& bench_name, const std::vector<std::string>& problems) {
  std::string message = bench_name + ":";
  for (std::size_t i = 0; i < problems.size() && i < 5; ++i) message += (i ? "; " : " ") + problems[i];
  return message;
}

ImageCheck check_kernel_images(const std::vector<fs::path>& files, const PipelineOptions& options) {
  ImageCheck check;
  const fs::path cuobjdump = find_cuda_tool("cuobjdump");
  // A GPU test double has no device the CUDA driver knows.
  const json device = options.gpu_available ? host_gpu_device() : json();
  const std::string capability = device.is_object() ? device.value("compute_capability", std::string()) : "";
  if (capability.empty()) {
    check.note = "kernel images not checked: no CUDA device";
    return check;
  }
  if (cuobjdump.empty()) {
    check.note = "kernel images not checked: cuobjdump not found";
    return check;
  }
  int with_code = 0;
  for (const fs::path& file : files) {
    auto dump = [&](const char* what) {
      ChildSpec objdump;
      objdump.argv = {cuobjdump.string(), what, file.string()};
      objdump.timeout_s = 120;
      objdump.tail_bytes = std::size_t{4} << 20;
      ChildOutcome outcome = run_child(objdump, *options.stop);
      return outcome.ok() ? outcome.output_tail : std::string();  // no device code: it says so and fails
    };
    const KernelImages images = parse_image_lists(dump("--list-elf"), dump("--list-ptx"));
    if (images.sass.empty() && images.ptx.empty()) continue;
    ++with_code;
    if (std::string problem = image_problem(images, capability); !problem.empty())
      check.problems.push_back(file.filename().string() + ": " + problem);
    for (const std::string& problem : resource_problems(dump("--dump-resource-usage")))
      check.problems.push_back(file.filename().string() + ": " + problem);
  }
  check.note = with_code == 0 ? "no device code in it or its libraries"
                              : std::to_string(with_code) + " file(s) with kernels for compute capability " +
                                    capability + ", registers and static shared memory within limits";
  return check;
}

void check_marked_launches(BenchResult& result, const BenchConfig& bench, const InjectedLaunches& observed) {
  if (!observed.refused.empty()) {
    // The bench's own error names no limit; the record does.
    result.status = "failed";
    result.message = bench.name + ": " + observed.refused.front();
    return;
  }
  if (result.status == "failed") return;  // the bench's own message says why
  if (!observed.problems.empty()) {
    // An incomplete record could hide the launch that breaks an expectation.
    result.status = "failed";
    result.message = bench.name + ": the launch records are incomplete: " + observed.problems.front();
    return;
  }
  std::vector<std::string> failures;
  int checked = 0;
  for (json& part : result.cases) {
    const std::string name = part.value("name", "");
    std::vector<json> launches;
    json listed = json::array();
    for (const json& launch : observed.launches) {
      if (launch.value("mark", "") != "case " + name) continue;
      json plain = launch;
      plain.erase("mark");
      listed.push_back(plain);
      launches.push_back(std::move(plain));
    }
    part["launches"] = listed;
    std::vector<LaunchExpectation> rules = bench.launches;
    if (part.contains("expected_launch")) {
      try {
        rules.insert(rules.begin(), expectation_of(part["expected_launch"]));
      } catch (const std::exception& error) {
        failures.push_back(name + ": its expected_launch is malformed (" + error.what() + ")");
        continue;
      }
    }
    if (rules.empty()) continue;
    ++checked;
    LaunchCheck check = check_launches(rules, launches);
    result.details["expectations"][name] = check.details;
    if (!check.passed) failures.push_back(name + ": " + check.message);
  }
  if (!failures.empty()) {
    result.status = "failed";
    result.message = bench.name + ": " + std::to_string(failures.size()) + " of " +
                     std::to_string(result.cases.size()) + " cases launched otherwise than declared: ";
    for (std::size_t i = 0; i < failures.size() && i < 5; ++i)
      result.message += (i ? "; " : "") + failures[i];
    return;
  }
  result.details["launches"] = observed.launches.size();
  result.message = bench.name + ": " + std::to_string(observed.launches.size()) + " launches; " +
                   std::to_string(checked) + " of " + std::to_string(result.cases.size()) +
                   " cases launched as declared";
}

// load of a bench of another harness (load_check.hpp).
BenchResult run_adapted_load(const BenchAdapter& adapter, const BenchConfig& bench, const RepoConfig& config,
                             const PipelineOptions& options) {
  BenchResult result;
  const fs::path executable = options.checkout / bench.path;
  ChildSpec spec;
  spec.argv = {executable.string()};
  for (std::string& arg : adapter.list_args()) spec.argv.push_back(std::move(arg));
  spec.cwd = options.checkout;
  spec.env = {{"LD_BIND_NOW", "1"}};
  spec.timeout_s = config.timeout_for(StageName::load);
  ChildOutcome listed = run_child(spec, *options.stop);
  result.seconds = listed.seconds;
  if (!listed.ok()) {
    result.status = "failed";
    result.message = bench.name + ": does not start with every symbol bound (LD_BIND_NOW, " +
                     adapter.harness() + " listing): " + listed.describe();
    // The dynamic loader's own line names the library and the symbol.
    std::istringstream lines(listed.output_tail);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("undefined symbol") != std::string::npos ||
          line.find("error while loading shared libraries") != std::string::npos) {
        result.message += ": " + line;
        break;
      }
    }
    result.log_tail = listed.output_tail;
    return result;
  }
  const ImageCheck images =
      check_kernel_images(files_with_device_code(executable, options.checkout), options);
  if (!images.problems.empty()) {
    result.status = "failed";
    result.message = problems_message(bench.name, images.problems);
    return result;
  }
  result.message = bench.name + ": its symbols resolve; " + images.note;
  return result;
}

// The first error compute-sanitizer reported: its "=========" block.
std::string first_sanitizer_report(const std::string& output) {
  std::istringstream lines(output);
  std::string report;
  int taken = 0;
  for (std::string line; std::getline(lines, line);) {
    const bool sanitizer = line.rfind("========= ", 0) == 0;
    if (report.empty()) {
      if (sanitizer && line.find("COMPUTE-SANITIZER") == std::string::npos &&
          line.find("ERROR SUMMARY") == std::string::npos)
        report = line.substr(10);
      continue;
    }
    if (!sanitizer || line.size() <= 10 || ++taken > 6) break;  // a blank "=========" ends the block
    report += "\n" + line.substr(10);
  }
  return report;
}

// compute-sanitizer's tools over a bench that passed correctness: any error
// fails the stage, quoting the first report.
void sanitize(BenchResult& result, const BenchAdapter& adapter, const BenchConfig& bench,
              const RepoConfig& config, const PipelineOptions& options) {
  const fs::path sanitizer = find_cuda_tool("compute-sanitizer");
  if (sanitizer.empty()) {
    result.status = "failed";
    result.message += "; compute-sanitizer not found, so the sanitize tools asked for did not run";
    return;
  }
  constexpr int kFoundErrors = 86;
  for (const std::string& tool : bench.sanitize_tools) {
    const fs::path json_out = temp_json("sanitize");
    ChildSpec spec;
    spec.argv = {sanitizer.string(),           "--tool",        tool, "--error-exitcode",
                 std::to_string(kFoundErrors), "--print-limit", "10"};
    for (std::string& part : bench_command(bench, options.checkout)) spec.argv.push_back(std::move(part));
    spec.env = bench_env(bench);
    if (adapter.speaks_kwbench()) {
      spec.argv.insert(spec.argv.end(), {"--stage", "correctness", "--in-process", "--case",
                                         bench.sanitize_cases.empty() ? bench.cases : bench.sanitize_cases,
                                         "--json", json_out.string()});
    } else {
      for (std::string& arg : adapter.one_pass_args({bench, config, options.checkout, *options.stop}))
        spec.argv.push_back(std::move(arg));
      spec.argv.insert(spec.argv.end(), bench.args.begin(), bench.args.end());
    }
    spec.cwd = options.checkout;
    spec.timeout_s = config.timeout_for(StageName::correctness);
    spec.tail_bytes = std::size_t{256} * 1024;
    ChildOutcome outcome = run_child(spec, *options.stop);
    std::error_code ec;
    fs::remove(json_out, ec);
    result.seconds += outcome.seconds;
    result.details["sanitize"][tool] = {{"seconds", outcome.seconds}, {"exit_code", outcome.exit_code}};
    if (outcome.ok()) {
      result.message += "; " + tool + ": no errors";
      continue;
    }
    result.status = "failed";
    result.log_tail = outcome.output_tail;
    if (outcome.exit_code == kFoundErrors) {
      result.message += "; " + tool + " found errors: " + first_sanitizer_report(outcome.output_tail);
    } else {
      result.message += "; under " + tool + " the bench " + outcome.describe();
    }
    return;
  }
  if (result.status == "skipped") result.status = "passed";  // no check command, but sanitized
}

// correctness of a bench of another harness: its `check` command.
BenchResult run_check_command(const BenchConfig& bench, const PipelineOptions& options) {
  BenchResult result;
  if (bench.check.empty()) {
    result.status = "skipped";
    result.message = bench.name + ": no check command (kernelwatch.json benches[].check)";
    return result;
  }
  ChildSpec spec;
  spec.argv = bench.check;
  // A path in the repository, like the bench's own; a bare name is looked up in PATH.
  if (spec.argv[0].find('/') != std::string::npos && fs::path(spec.argv[0]).is_relative())
    spec.argv[0] = (options.checkout / spec.argv[0]).string();
  spec.cwd = options.checkout;
  spec.timeout_s = bench.check_timeout_s;
  ChildOutcome outcome = run_child(spec, *options.stop);
  result.seconds = outcome.seconds;
  result.status = outcome.ok() ? "passed" : "failed";
  result.message =
      bench.name + ": check `" + bench.check[0] + "` " + (outcome.ok() ? "passed" : outcome.describe());
  if (!outcome.ok()) result.log_tail = outcome.output_tail;
  return result;
}

}  // namespace kw::agent
