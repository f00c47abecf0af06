// The merge gate end to end: commits in a temporary git repo, `kw submit
// --wait` as CI runs it, a real kw-server on embedded PostgreSQL, and a
// `kw agent` whose bench is the kwbench CPU TEST DOUBLE. The exit code is
// what a required status check sees.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "../support/api_stand_in.hpp"
#include "../support/e2e.hpp"

namespace {

using namespace kw::testing;
using nlohmann::json;

class GateE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_dir_ = make_temp_dir("kw-e2e-gate");
    server_.start();
    server_.project("demo");
    agent_token_ = server_.token("agent", "gpu-hosts");
    ci_token_ = server_.token("ci", "ci");
    agent_ = std::make_unique<ChildProcess>(std::vector<std::string>{
        KW_BINARY, "agent", "--server", server_.url(), "--token", agent_token_, "--work-dir",
        (work_dir_ / "agent").string(), "--repo", "demo=" + repo_.dir().string(), "--name", "gpu-host-1",
        "--poll-seconds", "0.3", "--gpu-test-double", "kwbench CPU test double"});
    base_ = repo_.commit("baseline");
    CommandResult first = gate(base_, "main");
    ASSERT_EQ(first.exit_code, 0) << first.output;
  }
  void TearDown() override {
    agent_->signal(SIGTERM);
    agent_->wait_exit();
    std::error_code ec;
    fs::remove_all(work_dir_, ec);
  }

  // `env`: NAME=VALUE for kw's environment; `extra`: more flags.
  CommandResult gate(const std::string& commit, const std::string& branch, bool with_base = false,
                     const std::vector<std::string>& extra = {}, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {"env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {KW_BINARY, "submit", "--project", "demo", "--commit", commit, "--branch", branch,
                             "--wait", "--timeout", "120s", "--server", server_.url(), "--token", ci_token_});
    if (with_base) {
      argv.insert(argv.end(), {"--base", pr_base_.empty() ? base_ : pr_base_, "--pr", "7"});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_command(argv);
  }
  std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string change(const std::string& behaviour, const std::string& message) {
    repo_.write("kwbench-fake.json", behaviour);
    return repo_.commit(message);
  }

  fs::path work_dir_;
  TrackedRepo repo_;
  ServerUnderTest server_;
  std::unique_ptr<ChildProcess> agent_;
  std::string agent_token_, ci_token_, base_;
  std::string pr_base_;  // a pull request's base where it is not base_

  json job_of(const std::string& commit, const std::string& branch) {
    return server_.client(ci_token_)
        .post("/api/v1/jobs", {{"project", "demo"}, {"commit", commit}, {"branch", branch}})
        .json();  // the existing job (idempotent): its id and run
  }
  CommandResult ack(const json& job, const std::string& reason) {
    return run_command({KW_BINARY, "ack", "--job", std::to_string(job["id"].get<int>()), "--reason", reason,
                        "--server", server_.url(), "--token", ci_token_});
  }
  json run_of(const json& job) { return server_.client().get("/api/v1/runs/" + job["run_id"].dump()).json(); }
  void set_thresholds(const json& thresholds) {
    json config = json::parse(read(repo_.dir() / "kernelwatch.json"));
    config["thresholds"] = thresholds;
    repo_.write("kernelwatch.json", config.dump(2));
  }
};

TEST_F(GateE2eTest, GatePassesAnUnchangedCommit) {
  std::string head = change(R"({"note": "docs only"})", "unchanged kernels");
  CommandResult result = gate(head, "pr-7", true);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("kernelwatch: pass for " + head.substr(0, 12)), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("2 compared with a baseline"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(server_.url() + "/#/run/"), std::string::npos);
  // Each state once: "queued" is not said twice.
  std::size_t first = result.output.find(" queued");
  ASSERT_NE(first, std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(" queued", first + 1), std::string::npos) << result.output;
}

TEST_F(GateE2eTest, GateFailsOnATenPercentSlowdown) {
  std::string head = change(R"({"slowdown": 1.10})", "smaller tiles");
  CommandResult result = gate(head, "pr-7", true);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("kernelwatch: REGRESSION in " + head.substr(0, 12)), std::string::npos)
      << result.output;
  for (const std::string name : {"fake.scale/n1m", "fake.scale/n16m"}) {
    std::smatch match;
    ASSERT_TRUE(std::regex_search(result.output, match, std::regex(name + R"(: ([0-9.]+)x the time of)")))
        << name << "\n"
        << result.output;
    EXPECT_NEAR(std::stod(match[1]), 1.10, 0.02) << result.output;
  }
  EXPECT_NE(result.output.find("base_commit " + base_.substr(0, 12)), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("intended? acknowledge it: kw ack --run "), std::string::npos)
      << result.output;
}

// With an agent that has Nsight Compute (the ncu TEST DOUBLE: real H100
// output, the kernel's time scaled by the commit's slowdown), the gate waits
// for the profile of the regression's worst case and puts it in the verdict.
TEST_F(GateE2eTest, GateWaitsForTheRegressionsProfileAndShowsIt) {
  agent_->signal(SIGTERM);
  agent_->wait_exit();
  const std::string ncu = KW_SOURCE_DIR "/tests/support/ncu_test_double.py";
  agent_ = std::make_unique<ChildProcess>(std::vector<std::string>{
      KW_BINARY, "agent", "--server", server_.url(), "--token", agent_token_, "--work-dir",
      (work_dir_ / "agent").string(), "--repo", "demo=" + repo_.dir().string(), "--name", "gpu-host-1",
      "--poll-seconds", "0.3", "--gpu-test-double", "kwbench CPU test double", "--ncu", ncu});
  std::string head = change(R"({"slowdown": 1.25})", "smaller tiles");
  const fs::path summary = work_dir_ / "step-summary.md";
  CommandResult result = gate(head, "pr-7", true, {"--summary", summary.string()});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  // (It says it waits only while the profile runs: on a fast agent the
  // profile may be done before the verdict is read.)
  std::smatch match;
  ASSERT_TRUE(std::regex_search(
      result.output, match,
      std::regex(
          R"(profiled fake\.scale/n[0-9]+m under Nsight Compute: `void attention_forward_kernel<.*>\(ForwardParams\)`: time ([0-9.]+) -> ([0-9.]+) us, SM 58\.2 -> 58\.2%)")))
      << result.output;
  EXPECT_NEAR(std::stod(match[2]) / std::stod(match[1]), 1.25, 1e-3);
  const std::string markdown = read(summary);
  EXPECT_NE(markdown.find("<details><summary>Nsight Compute profile of `fake.scale/"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| base " + base_.substr(0, 8) + " | 4 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("| head " + head.substr(0, 8) + " | 4 |"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("/ncu/head)"), std::string::npos) << markdown;
}

TEST_F(GateE2eTest, GateFailsOnALaunchGeometryMismatch) {
  std::string head = change(R"({"fail_stage": "launch_geometry"})", "benchmark calls the old kernel");
  CommandResult result = gate(head, "pr-7", true);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("PREFLIGHT FAILED"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(
                "stage launch_geometry: fake: fake.scale/n1m: block: expected (384,1,1), observed (128,1,1)"),
            std::string::npos)
      << result.output;
  // Each stage as the agent streamed it, the failed one before the verdict,
  // and the stages after it never started.
  std::size_t built = result.output.find("  stage build passed in ");
  std::size_t failed = result.output.find("  stage launch_geometry FAILED in ");
  std::size_t verdict = result.output.find("PREFLIGHT FAILED");
  ASSERT_NE(built, std::string::npos) << result.output;
  ASSERT_NE(failed, std::string::npos) << result.output;
  EXPECT_LT(built, failed);
  EXPECT_LT(failed, verdict);
  EXPECT_NE(result.output.find("  stage correctness skipped: not run: the launch_geometry stage failed"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("  stage correctness started"), std::string::npos) << result.output;
}

// A GPU host whose GPU is gone: every GPU stage is skipped, nothing is
// measured, and the gate says so instead of passing.
TEST_F(GateE2eTest, GateSaysNoDataWhenNothingWasMeasured) {
  agent_->signal(SIGTERM);
  agent_->wait_exit();
  agent_ = std::make_unique<ChildProcess>(std::vector<std::string>{
      KW_BINARY, "agent", "--server", server_.url(), "--token", agent_token_, "--work-dir",
      (work_dir_ / "agent").string(), "--repo", "demo=" + repo_.dir().string(), "--name", "gpu-host-1",
      "--poll-seconds", "0.3"});
  std::string head = change(R"({"note": "docs only"})", "unchanged kernels");
  CommandResult result = gate(head, "pr-7", true);
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("kernelwatch: NO DATA for " + head.substr(0, 12)), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("stage full_bench skipped: no CUDA device"), std::string::npos)
      << result.output;
}

// The mistakes a team makes in its first hour, each named as what it is on
// the first line the gate prints for it. A configuration mistake fails the
// config stage (exit 2, at once: the commit says the same on every attempt).
class FirstHourMistakeTest : public GateE2eTest {
 protected:
  // kernelwatch.json with `edit` applied to the working one, committed.
  std::string config_commit(const std::function<void(json&)>& edit, const std::string& message) {
    json config = json::parse(read(repo_.dir() / "kernelwatch.json"));
    edit(config);
    repo_.write("kernelwatch.json", config.dump(2));
    return repo_.commit(message);
  }
  // The gate's exit and the first line it prints after "PREFLIGHT FAILED".
  std::pair<int, std::string> first_failure(const std::string& head) {
    auto started = std::chrono::steady_clock::now();
    CommandResult result = gate(head, "pr-7", true);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << "retried?";
    const std::string headline = "kernelwatch: PREFLIGHT FAILED for " + head.substr(0, 12) + "\n";
    const std::size_t at = result.output.find(headline);
    EXPECT_NE(at, std::string::npos) << result.output;
    if (at == std::string::npos) return {result.exit_code, result.output};
    const std::size_t from = at + headline.size();
    return {result.exit_code, result.output.substr(from, result.output.find('\n', from) - from)};
  }
};

TEST_F(FirstHourMistakeTest, AnUnknownKeyIsNamedWithTheKeyItMeant) {
  const std::string head = config_commit(
      [](json& c) {
        c["benchs"] = c["benches"];
        c.erase("benches");
      },
      "benchs");
  const auto [exit_code, line] = first_failure(head);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(line, "  stage config: benchs: unknown field; did you mean `benches`?");
}

TEST_F(FirstHourMistakeTest, TwoWrongFieldsAreListedAtOnce) {
  const std::string head = config_commit(
      [](json& c) {
        c["benches"][0]["arg"] = {"--quick"};
        c["benches"][0]["format"] = "gbnech";
      },
      "two wrong fields");
  const auto [exit_code, line] = first_failure(head);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(
      line,
      "  stage config: 2 problems: benches[0].arg: unknown field; did you mean `args`?; "
      "benches[0].format: unknown value \"gbnech\"; did you mean \"gbench\"? (expected kwbench, gbench, "
      "nvbench, python, perf_report, do_bench, tritonbench)");
  // The job page shows the stage like any other, and the job is done, not failed.
  json job = job_of(head, "pr-7");
  EXPECT_EQ(job["state"], "done") << job.dump();
  json run = server_.client(ci_token_).get("/api/v1/runs/" + std::to_string(job["run_id"].get<int>())).json();
  ASSERT_FALSE(run["stages"].empty());
  EXPECT_EQ(run["stages"][0]["name"], "config");
  EXPECT_EQ(run["stages"][0]["status"], "failed");
  EXPECT_EQ(run["stages"][1]["message"], "not run: the config stage failed");
  EXPECT_EQ(run["verdict"], "failed");
}

TEST_F(FirstHourMistakeTest, AProjectNameThatIsNotTheJobsIsAConfigMistake) {
  const std::string head = config_commit([](json& c) { c["project"] = "demo-kernels"; }, "wrong project");
  const auto [exit_code, line] = first_failure(head);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(line,
            "  stage config: project: \"demo-kernels\" is not this job's project \"demo\" (kernelwatch.json "
            "names the project as the server knows it)");
}

TEST_F(FirstHourMistakeTest, ABenchTheBuildDidNotWriteIsNamedByItsPath) {
  const std::string head = config_commit([](json& c) { c["benches"][0]["path"] = "build/my_bench"; },
                                         "a bench path that is not built");
  const auto [exit_code, line] = first_failure(head);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(line,
            "  stage load: fake: `build/my_bench`: no such file after the build (did the build write it "
            "elsewhere?)");
}

// A commit that does not build. kw submit --wait exits 2 with the
// compiler's error as the stage fails; kw gate, attached after the job
// finished, prints it from the run.
TEST_F(GateE2eTest, GateShowsTheCompilerErrorOfABrokenBuild) {
  repo_.write("build.sh",
              "echo 'attention_fwd.cu(88): error: identifier \"kBlockN\" is undefined' >&2\nexit 2\n");
  std::string head = repo_.commit("broken build");
  CommandResult result = gate(head, "pr-7", true);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("kernelwatch: PREFLIGHT FAILED for " + head.substr(0, 12)), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("identifier \"kBlockN\" is undefined"), std::string::npos) << result.output;

  json job = server_.client(ci_token_)
                 .post("/api/v1/jobs", {{"project", "demo"}, {"commit", head}, {"branch", "pr-7"}})
                 .json();
  CommandResult later = run_command({KW_BINARY, "gate", "--job", std::to_string(job["id"].get<int>()),
                                     "--server", server_.url(), "--token", ci_token_});
  EXPECT_EQ(later.exit_code, 2) << later.output;
  EXPECT_NE(later.output.find("kernelwatch: PREFLIGHT FAILED for " + head.substr(0, 12) +
                              "\n  stage build: `sh build.sh` exited 2"),
            std::string::npos)
      << later.output;
  // The compiler's line, once: from the job's stages, not again from the run.
  const std::size_t first = later.output.find("identifier \"kBlockN\" is undefined");
  ASSERT_NE(first, std::string::npos) << later.output;
  EXPECT_EQ(later.output.find("identifier \"kBlockN\" is undefined", first + 1), std::string::npos)
      << later.output;
}

TEST_F(GateE2eTest, GatePassesAnAcknowledgedRegression) {
  std::string head = change(R"({"slowdown": 1.10})", "intended slowdown");
  ASSERT_EQ(gate(head, "pr-7", true).exit_code, 1);
  json job = server_.client(ci_token_)
                 .post("/api/v1/jobs", {{"project", "demo"}, {"commit", head}, {"branch", "pr-7"}})
                 .json();  // the same job (idempotent): its id and run
  CommandResult ack =
      run_command({KW_BINARY, "ack", "--job", std::to_string(job["id"].get<int>()), "--reason",
                   "40% less memory for 10% time", "--server", server_.url(), "--token", ci_token_});
  ASSERT_EQ(ack.exit_code, 0) << ack.output;
  EXPECT_NE(
      ack.output.find("kernelwatch: acknowledged run " + std::to_string(job["run_id"].get<int>()) + " (" +
                      head.substr(0, 12) + ", 2 regressed case(s)): 40% less memory for 10% time"),
      std::string::npos)
      << ack.output;
  CommandResult missing = run_command(
      {KW_BINARY, "ack", "--run", "9999", "--reason", "x", "--server", server_.url(), "--token", ci_token_});
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("kernelwatch: run 9999 not acknowledged (HTTP 404): no run 9999"),
            std::string::npos)
      << missing.output;
  CommandResult result = run_command({KW_BINARY, "gate", "--job", std::to_string(job["id"].get<int>()),
                                      "--server", server_.url(), "--token", ci_token_});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("regression acknowledged by ci: 40% less memory for 10% time"),
            std::string::npos)
      << result.output;
}

// On a pull request the verdict is one comment, edited in place by each
// run (a person's comment beside it untouched), and the job summary gets the
// same Markdown. GitHub is the TEST DOUBLE CommentApiStandIn.
TEST_F(GateE2eTest, GateKeepsOneCommentOnThePullRequestAndWritesTheJobSummary) {
  CommentApiStandIn github("/repos/acme/kernels/issues/7/comments", "/repos/acme/kernels/issues/comments/",
                           "PATCH");
  github.add_comment("LGTM once the benchmarks are in");
  const fs::path summary = work_dir_ / "step-summary.md";
  const std::vector<std::string> report = {"--summary",      summary.string(), "--github-comment",
                                           "acme/kernels#7", "--github-api",   github.url()};
  std::string slower = change(R"({"slowdown": 1.10})", "smaller tiles");
  CommandResult first = gate(slower, "pr-7", true, report, {"GITHUB_TOKEN=ghs_test"});
  EXPECT_EQ(first.exit_code, 1) << first.output;
  EXPECT_NE(first.output.find("pull request acme/kernels#7: created comment 1002"), std::string::npos)
      << first.output;
  auto comments = github.comments();
  ASSERT_EQ(comments.size(), 2u);
  const std::string& posted = comments[1002];
  EXPECT_NE(posted.find("<!-- kernelwatch:demo -->"), std::string::npos) << posted;
  EXPECT_NE(posted.find("regression for `" + slower.substr(0, 12) + "`"), std::string::npos) << posted;
  EXPECT_TRUE(std::regex_search(posted, std::regex(R"(\| `fake\.scale/n16m` \| 1\.[01][0-9]x \| )")))
      << posted;
  // What the gate can see: each row's smallest detectable slowdown, and the median case's.
  EXPECT_NE(posted.find("| threshold | sees |"), std::string::npos) << posted;
  EXPECT_TRUE(std::regex_search(posted, std::regex(R"(% \| [0-9.]+% \|)"))) << posted;
  EXPECT_TRUE(std::regex_search(
      posted, std::regex(R"(The gate sees slowdowns of [0-9.]+% or more on the median case)")))
      << posted;
  // Why each case was timed: what its fingerprint changed from the base's.
  EXPECT_NE(posted.find("| changed from the base |"), std::string::npos) << posted;
  EXPECT_TRUE(std::regex_search(
      posted,
      std::regex(R"(\| `fake\.scale/n16m` \|[^\n]*\| the code of kernel fake_kernel_n16m\(float\*\) \|)")))
      << posted;
  EXPECT_NE(posted.find("kw ack --run "), std::string::npos) << posted;
  EXPECT_NE(posted.find(server_.url() + "/#/run/"), std::string::npos) << posted;
  EXPECT_EQ(read(summary), posted + "\n");
  for (const auto& request : github.requests()) {
    EXPECT_EQ(request.headers.at("authorization"), "Bearer ghs_test");
    EXPECT_EQ(request.headers.at("accept"), "application/vnd.github+json");
  }

  std::string fixed = change(R"({"note": "tiles back"})", "tiles back");
  CommandResult second = gate(fixed, "pr-7", true, report, {"GITHUB_TOKEN=ghs_test"});
  EXPECT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("pull request acme/kernels#7: edited comment 1002"), std::string::npos)
      << second.output;
  comments = github.comments();
  ASSERT_EQ(comments.size(), 2u) << "a second comment instead of an edit";
  EXPECT_EQ(comments[1001], "LGTM once the benchmarks are in");
  EXPECT_NE(comments[1002].find("pass for `" + fixed.substr(0, 12) + "`"), std::string::npos)
      << comments[1002];
  EXPECT_EQ(comments[1002].find("Regressed"), std::string::npos) << comments[1002];
  // The fix runs the base's code: its cases are not timed but for the audit.
  EXPECT_NE(
      comments[1002].find("1 ran code identical to the base's and were not timed; 1 more identical ones "
                          "were timed as an audit, 0 of them flagged."),
      std::string::npos)
      << comments[1002];
}

// A token that may not comment (a fork's read-only GITHUB_TOKEN) costs the
// comment, not the verdict.
TEST_F(GateE2eTest, GateKeepsItsVerdictWhenTheCommentIsRefused) {
  CommentApiStandIn github("/repos/acme/kernels/issues/7/comments", "/repos/acme/kernels/issues/comments/",
                           "PATCH");
  github.refuse(403);
  std::string slower = change(R"({"slowdown": 1.10})", "smaller tiles");
  CommandResult result =
      gate(slower, "pr-7", true, {"--github-comment", "acme/kernels#7", "--github-api", github.url()},
           {"GITHUB_TOKEN=ghs_read_only"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("kernelwatch: could not comment on pull request acme/kernels#7: listing "
                               "comments: HTTP 403"),
            std::string::npos)
      << result.output;
  CommandResult no_token = gate(slower, "pr-7", true, {"--github-comment", "acme/kernels#7"});
  EXPECT_NE(no_token.output.find("needs GITHUB_TOKEN"), std::string::npos) << no_token.output;
}

// On a merge request the verdict is one note, edited in place, with
// the GitLab token in PRIVATE-TOKEN. GitLab is the TEST DOUBLE
// CommentApiStandIn; a preflight failure's note carries the compiler's error.
TEST_F(GateE2eTest, GateKeepsOneNoteOnTheMergeRequest) {
  CommentApiStandIn gitlab("/projects/42/merge_requests/7/notes", "/projects/42/merge_requests/7/notes/",
                           "PUT");
  const std::vector<std::string> report = {"--gitlab-note", "42!7"};
  const std::vector<std::string> env = {"CI_API_V4_URL=" + gitlab.url(), "KW_GITLAB_TOKEN=glpat-test"};
  repo_.write("build.sh",
              "echo 'attention_fwd.cu(88): error: identifier \"kBlockN\" is undefined' >&2\nexit 2\n");
  std::string broken = repo_.commit("broken build");
  CommandResult first = gate(broken, "mr-7", true, report, env);
  EXPECT_EQ(first.exit_code, 2) << first.output;
  EXPECT_NE(first.output.find("merge request 42!7: created comment 1001"), std::string::npos) << first.output;
  auto notes = gitlab.comments();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[1001].find("preflight failed for `" + broken.substr(0, 12) + "`"), std::string::npos)
      << notes[1001];
  EXPECT_NE(notes[1001].find("Stage **build** failed"), std::string::npos) << notes[1001];
  EXPECT_NE(notes[1001].find("identifier \"kBlockN\" is undefined"), std::string::npos) << notes[1001];

  repo_.write("build.sh", "echo building\n");
  std::string mended = repo_.commit("mended build");
  CommandResult second = gate(mended, "mr-7", true, report, env);
  EXPECT_EQ(second.exit_code, 0) << second.output;
  notes = gitlab.comments();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[1001].find("pass for `" + mended.substr(0, 12) + "`"), std::string::npos) << notes[1001];
  for (const auto& request : gitlab.requests()) {
    EXPECT_EQ(request.headers.at("private-token"), "glpat-test");
    EXPECT_FALSE(request.headers.contains("authorization"));
  }
}

// A commit measured again is a new job (its rerun number said), and a
// plain submit afterwards finds that newest measurement.
TEST_F(GateE2eTest, RerunMeasuresACommitAgainAsANewJob) {
  CommandResult again = gate(base_, "main", false, {"--rerun"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  std::smatch rerun;
  ASSERT_TRUE(
      std::regex_search(again.output, rerun, std::regex(R"(job ([0-9]+) queued \(rerun 1 of this commit\))")))
      << again.output;
  CommandResult plain = gate(base_, "main");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("job " + rerun[1].str() + " already exists (done, rerun 1; kw submit --rerun"),
            std::string::npos)
      << plain.output;
  int of_base = 0;
  for (const json& run : server_.client().get("/api/v1/projects/demo/runs?branch=main").json())
    of_base += run["commit"] == base_;
  EXPECT_EQ(of_base, 2) << "the rerun made no second run of " << base_;
}

// Main fast-forwarded to a pull request's commit gets a run of its own
// on main (its history has the commit), and kw submit says the pull request
// measured it first.
TEST_F(GateE2eTest, AMainPushOfAPullRequestsCommitGetsItsOwnRun) {
  std::string head = change(R"({"note": "docs only"})", "the pull request");
  CommandResult pr = gate(head, "pr-7", true);
  ASSERT_EQ(pr.exit_code, 0) << pr.output;
  CommandResult main = gate(head, "main");
  EXPECT_EQ(main.exit_code, 0) << main.output;
  std::smatch job;
  ASSERT_TRUE(std::regex_search(
      main.output, job,
      std::regex(
          R"(job ([0-9]+) queued; the commit was measured as pull request #7 \(job [0-9]+, pass\): the default branch gets a run of its own)")))
      << main.output;
  json main_job = server_.client().get("/api/v1/jobs/" + job[1].str()).json();
  json run = server_.client().get("/api/v1/runs/" + main_job["run_id"].dump()).json();
  EXPECT_EQ(run["branch"], "main");
  EXPECT_EQ(run["commit"], head);
}

// An acknowledgement made on the pull request carries to main: to the
// merge commit (its parent is the pull request's commit), and to a
// fast-forward (the same tree), each saying where it came from. The commit's
// subject and author come with its run.
TEST_F(GateE2eTest, AnAcknowledgementCarriesToTheCommitThatMergesThePullRequest) {
  std::string head = change(R"({"slowdown": 1.10})", "smaller tiles: 40% less memory");
  ASSERT_EQ(gate(head, "pr-7", true).exit_code, 1);
  json pr_job = job_of(head, "pr-7");
  CommandResult acked = ack(pr_job, "intended: 40% less memory");
  ASSERT_EQ(acked.exit_code, 0) << acked.output;
  json pr_run = run_of(pr_job);
  EXPECT_EQ(pr_run["git"]["subject"], "smaller tiles: 40% less memory");
  EXPECT_EQ(pr_run["git"]["author"], "kernelwatch tests");
  EXPECT_EQ(pr_run["git"]["parents"], json::array({base_}));

  // main moved on meanwhile; the merge commit's tree is neither side's.
  repo_.git({"checkout", "-q", "-b", "pr-7", head});
  repo_.git({"checkout", "-q", "main"});
  repo_.git({"reset", "-q", "--hard", base_});
  repo_.write("README.md", "docs\n");
  std::string other = repo_.commit("docs");
  ASSERT_EQ(gate(other, "main").exit_code, 0);
  repo_.git({"merge", "-q", "--no-ff", "-m", "Merge pull request #7", "pr-7"});
  std::string merge = repo_.git({"rev-parse", "HEAD"}).substr(0, 40);
  CommandResult merged = gate(merge, "main");
  EXPECT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find("regression acknowledged by ci: intended: 40% less memory (carried from run " +
                               pr_job["run_id"].dump() + " of " + head.substr(0, 12) +
                               " on pr-7, which this commit merges)"),
            std::string::npos)
      << merged.output;
  json merge_run = run_of(job_of(merge, "main"));
  EXPECT_EQ(merge_run["verdict"], "pass");
  EXPECT_EQ(merge_run["acknowledgement"]["carried_from"]["run_id"], pr_job["run_id"]);
  int flagged = 0;
  for (const json& c : merge_run["comparisons"]) flagged += c["status"] == "regression";
  EXPECT_GT(flagged, 0) << "the merge run still shows what regressed";
}

TEST_F(GateE2eTest, AnAcknowledgementCarriesToAFastForwardOfMain) {
  std::string head = change(R"({"slowdown": 1.10})", "smaller tiles");
  ASSERT_EQ(gate(head, "pr-7", true).exit_code, 1);
  ASSERT_EQ(ack(job_of(head, "pr-7"), "intended").exit_code, 0);
  CommandResult forwarded = gate(head, "main");
  EXPECT_EQ(forwarded.exit_code, 0) << forwarded.output;
  EXPECT_NE(forwarded.output.find("regression acknowledged by ci: intended (carried from run "),
            std::string::npos)
      << forwarded.output;
  EXPECT_NE(forwarded.output.find("on pr-7, the same tree)"), std::string::npos) << forwarded.output;
}

// An acknowledgement covers the change acknowledged, no more: a merge
// that ends up slower than the pull request was is flagged again. And it
// carries both ways: acknowledging a run also passes an earlier regression
// of the same tree.
TEST_F(GateE2eTest, AnAcknowledgementDoesNotCoverALargerSlowdown) {
  std::string head = change(R"({"slowdown": 1.10})", "smaller tiles");
  ASSERT_EQ(gate(head, "pr-7", true).exit_code, 1);
  ASSERT_EQ(ack(job_of(head, "pr-7"), "intended").exit_code, 0);
  repo_.git({"checkout", "-q", "-b", "pr-7", head});
  repo_.git({"checkout", "-q", "main"});
  repo_.git({"reset", "-q", "--hard", base_});
  repo_.write("README.md", "docs\n");
  ASSERT_EQ(gate(repo_.commit("docs"), "main").exit_code, 0);
  // A merge whose conflict resolution made it slower still.
  repo_.git({"merge", "-q", "--no-ff", "--no-commit", "pr-7"});
  repo_.write("kwbench-fake.json", R"({"slowdown": 1.40})");
  std::string merge = repo_.commit("Merge pull request #7");
  CommandResult merged = gate(merge, "main");
  EXPECT_EQ(merged.exit_code, 1) << merged.output;
  EXPECT_NE(merged.output.find("kernelwatch: REGRESSION in " + merge.substr(0, 12)), std::string::npos)
      << merged.output;

  // Acknowledged before it is measured elsewhere: a later run of the same
  // tree that regressed is carried forward, and kw ack says which it reached.
  std::string again = change(R"({"slowdown": 1.10})", "smaller tiles, again");
  ASSERT_EQ(gate(again, "pr-8", true).exit_code, 1);
  repo_.git({"checkout", "-q", "-b", "pr-9"});
  repo_.git({"commit", "-q", "--amend", "-m", "smaller tiles, reworded"});
  std::string reworded = repo_.git({"rev-parse", "HEAD"}).substr(0, 40);
  ASSERT_EQ(gate(reworded, "pr-9", true).exit_code, 1);
  CommandResult acked = ack(job_of(reworded, "pr-9"), "intended");
  ASSERT_EQ(acked.exit_code, 0) << acked.output;
  json earlier = job_of(again, "pr-8");
  EXPECT_NE(acked.output.find("and run " + earlier["run_id"].dump() + ", a run of the same change"),
            std::string::npos)
      << acked.output;
  EXPECT_EQ(run_of(earlier)["verdict"], "pass");
}

// Kernelwatch.json's thresholds take effect, as committed in the commit
// judged; a pull request is judged by the stricter of its own and its base's,
// so it cannot loosen its own gate; compare shows what the run was judged by.
TEST_F(GateE2eTest, CommittedThresholdsDecideAndAPullRequestCannotLoosenItsOwn) {
  set_thresholds({{"min_threshold", 0.25}});
  repo_.write("kwbench-fake.json", R"({"slowdown": 1.10})");
  std::string loosening = repo_.commit("slower, and a 25% threshold to hide it");
  CommandResult refused = gate(loosening, "pr-7", true);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("threshold 1.0%"), std::string::npos) << refused.output;
  json refused_run = run_of(job_of(loosening, "pr-7"));
  // value(): a comparison without a field fails the test instead of reading past the object.
  for (const json& c : refused_run.value("comparisons", json::array())) {
    if (c.value("impl", "") != "candidate") continue;
    EXPECT_EQ(c.value("threshold", json()), 0.01) << c.dump();
    EXPECT_EQ(
        c.value("threshold_source", ""),
        "project setting (the base's, stricter than kernelwatch.json at " + loosening.substr(0, 12) + ")");
  }

  // Merged to main, the 25% threshold is the base's too: a 10% change passes.
  repo_.git({"reset", "-q", "--hard", base_});
  set_thresholds({{"min_threshold", 0.25}});
  std::string relaxed = repo_.commit("a 25% threshold");
  ASSERT_EQ(gate(relaxed, "main").exit_code, 0);
  pr_base_ = relaxed;
  std::string head = change(R"({"slowdown": 1.10})", "slower within the threshold");
  CommandResult passed = gate(head, "pr-8", true);
  EXPECT_EQ(passed.exit_code, 0) << passed.output;
  json run = run_of(job_of(head, "pr-8"));
  json compared = server_.client()
                      .get("/api/v1/compare?project=demo&base=" + relaxed.substr(0, 10) + "&head=" + head)
                      .json();
  ASSERT_EQ(compared["gpus"].size(), 1U) << compared.dump();
  std::map<std::string, double> on_run_page;
  for (const json& c : run.value("comparisons", json::array())) {
    if (c.value("impl", "") != "candidate") continue;
    EXPECT_EQ(c.value("status", ""), "unchanged") << c.dump();
    EXPECT_EQ(c.value("threshold", json()), 0.25) << c.dump();
    EXPECT_EQ(c.value("threshold_source", ""), "kernelwatch.json at " + head.substr(0, 12));
    on_run_page[c.value("case", "")] = c.value("threshold", 0.0);
  }
  ASSERT_EQ(on_run_page.size(), 2U) << run.dump();
  for (const json& c : compared["gpus"][0].value("cases", json::array())) {
    EXPECT_EQ(c.value("threshold", -1.0), on_run_page[c.value("case", "")]) << c.dump();
    EXPECT_EQ(c.value("threshold_source", ""), "kernelwatch.json at " + head.substr(0, 12)) << c.dump();
  }
}

// A push of 16 commits to main, the 9th of which makes one kernel 10%
// slower: the regression is bisected to that commit in at most log2(16) + 1
// jobs, each measuring a midpoint A/B against the newest good commit, the
// flagged case alone; the run and the bisect's API name it, and an ended
// bisect cannot be cancelled.
TEST_F(GateE2eTest, ARegressionInAPushOfSixteenCommitsIsBisectedToItsCommit) {
  std::vector<std::string> pushed;
  for (int i = 1; i <= 16; ++i) {
    repo_.write("history.txt", std::to_string(i) + "\n");
    if (i == 9) repo_.write("kwbench-fake.json", R"({"slowdown": 1.10, "slow_cases": ["fake.scale/n16m"]})");
    pushed.push_back(repo_.commit("commit " + std::to_string(i)));
  }
  CommandResult push =
      gate(pushed.back(), "main", false, {"--range-from", base_, "--repo", repo_.dir().string()});
  EXPECT_EQ(push.exit_code, 1) << push.output;
  EXPECT_NE(push.output.find("bisecting the 16 pushed commits for the one that brought it: bisect "),
            std::string::npos)
      << push.output;
  json run = run_of(job_of(pushed.back(), "main"));
  ASSERT_TRUE(run["bisect"].is_object()) << run.dump();
  const std::string path = "/api/v1/bisects/" + run["bisect"]["id"].dump();
  json bisect;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
       std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(300))) {
    bisect = server_.client().get(path).json();
    if (bisect["state"] != "running") break;
  }
  ASSERT_EQ(bisect["state"], "found") << bisect.dump(2);
  EXPECT_EQ(bisect["first_bad"], pushed[8]) << bisect.dump(2);
  EXPECT_LE(bisect["steps"].get<int>(), 5) << bisect.dump(2);
  EXPECT_EQ(bisect["jobs"].size(), bisect["steps"].get<std::size_t>());
  EXPECT_EQ(bisect["cases"], json::array({"fake.scale/n16m"})) << bisect.dump(2);
  for (const json& step : bisect["jobs"]) {
    EXPECT_EQ(step["state"], "done") << step.dump();
    // Its full_bench measured the flagged case; the other had its preflight only.
    for (const json& c : server_.client().get("/api/v1/runs/" + step["run_id"].dump()).json()["cases"])
      EXPECT_EQ(c["measurements"].empty(), c["name"] != "fake.scale/n16m") << c.dump();
    const auto at = std::find(pushed.begin(), pushed.end(), step["base_commit"]);
    EXPECT_TRUE(step["base_commit"] == base_ || at - pushed.begin() < 8)
        << "measured against a bad commit: " << step.dump();
  }
  EXPECT_EQ(run_of(job_of(pushed.back(), "main"))["bisect"]["first_bad"], pushed[8]);
  auto again = server_.client(ci_token_).post(path + "/cancel", json::object());
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(server_.client().get("/api/v1/bisects/999").status, 404);
}

TEST_F(GateE2eTest, GateReportsTheServerBeingDown) {
  int closed = free_port();
  CommandResult result =
      run_command({KW_BINARY, "submit", "--project", "demo", "--commit", base_, "--branch", "main", "--wait",
                   "--server", "http://127.0.0.1:" + std::to_string(closed), "--token", ci_token_});
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(
      result.output.find("kernelwatch: cannot reach the server http://127.0.0.1:" + std::to_string(closed)),
      std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Connection refused"), std::string::npos) << result.output;
}

}  // namespace
