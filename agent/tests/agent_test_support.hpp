// What the agent's unit tests share: a valid kernelwatch.json over the fake
// kwbench (a CPU TEST DOUBLE of a bench), and the pipeline's fixture.
#pragma once

#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "client/report_upload.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/run_report.hpp"
#include "kw/common/subprocess.hpp"
#include "kw/http/gzip.hpp"
#include "pipeline/adapters.hpp"
#include "pipeline/bench_checks.hpp"
#include "pipeline/launch_check.hpp"
#include "pipeline/load_check.hpp"
#include "pipeline/measurement_engine.hpp"
#include "pipeline/nvbench_adapter.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/profile_summary.hpp"
#include "project/built_commits.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {

using common::ChildOutcome;
using common::run_child;
using common::shell;

namespace fs = std::filesystem;
using nlohmann::json;

inline json valid_config() {
  return json::parse(R"({
    "project": "demo",
    "build": {"commands": ["true"], "timeout_s": 60},
    "benches": [{"name": "fake", "path": ")" KW_FAKE_BENCH R"(", "format": "kwbench"}],
    "timeouts_s": {"full_bench": 120},
    "thresholds": {"min_threshold": 0.02, "cases": {"fake.scale/n1m": 0.05}}
  })");
}

inline std::string config_error(const std::function<void(json&)>& mutate) {
  json config = valid_config();
  mutate(config);
  try {
    parse_repo_config(config);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "accepted";
}

// A python bench (kernels/python/kwbench.py) with the helper's CPU stand-in
// backend, a TEST DOUBLE for CUDA and torch: the agent runs it with kwbench's
// command line through the interpreter, stage by stage, and its replicates.
inline json python_config(const std::string& cases) {
  return {{"project", "demo"},
          {"build", {{"commands", {"true"}}}},
          {"benches",
           {{{"name", "py"},
             {"path", std::string(KW_SOURCE_DIR) + "/kernels/python/tests/standin_bench.py"},
             {"format", "python"},
             {"python", "python3"},
             {"cases", cases},
             {"args", {"--backend", "cpu-stand-in"}}}}},
          {"full_bench", {{"replicates", 2}, {"max_replicates", 2}, {"replicate_seconds", 0.05}}}};
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kw-pipeline-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    checkout_ = pattern;
  }
  void TearDown() override { fs::remove_all(checkout_); }

  // A pull request: the checkout against `base`, measured in one job.
  PipelineOptions ab_options(const fs::path& base) {
    PipelineOptions options;
    options.checkout = checkout_;
    options.base_checkout = base;
    options.base_commit = std::string(40, 'b');
    options.commit = std::string(40, 'c');
    options.branch = "pr";
    options.agent_name = "test";
    options.gpu_available = true;
    options.log = [this](const std::string& line) { log_ += line + "\n"; };
    return options;
  }
  // Its full_bench alone.
  json run_ab(const json& config, const fs::path& base) {
    PipelineOptions options = ab_options(base);
    options.only_stages = {common::StageName::full_bench};
    return run_pipeline(parse_repo_config(config), options);
  }
  json run(const json& behaviour, bool gpu = true, const json& config = valid_config(),
           std::vector<common::StageName> stages = {}) {
    std::ofstream(checkout_ / "kwbench-fake.json") << behaviour.dump();
    PipelineOptions options;
    options.only_stages = std::move(stages);
    options.checkout = checkout_;
    options.commit = std::string(40, 'c');
    options.branch = "main";
    options.agent_name = "test";
    options.gpu_available = gpu;
    options.log = [this](const std::string& line) { log_ += line + "\n"; };
    options.on_stage = [this](const json& event) { events_.push_back(event); };
    return run_pipeline(parse_repo_config(config), options);
  }

  static std::vector<std::string> statuses(const json& report) {
    std::vector<std::string> out;
    for (const json& stage : report["stages"]) out.push_back(stage["status"]);
    return out;
  }

  fs::path checkout_;
  std::string log_;
  std::vector<json> events_;  // what on_stage was given, in order
};

}  // namespace kw::agent
