// The CI templates and unit files use only commands and flags that exist:
// both YAML files parse, and every `kw` subcommand and `--flag` they pass is in
// that subcommand's --help. Their steps run under bash as a runner would run
// them: the install against a real kw-server, the submit with a `kw` TEST
// DOUBLE that prints its arguments.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#ifdef KW_SERVER_BINARY
#include "../../tests/support/server_under_test.hpp"
#endif
#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"

namespace {

using kw::testing::run_command;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string help(const std::vector<std::string>& command) {
  std::vector<std::string> argv = command;
  argv.push_back("--help");
  auto result = run_command(argv);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return result.output;
}

// Flags passed on the lines that build or run the kw command.
std::set<std::string> flags_in(const std::string& text, const std::regex& relevant_line) {
  std::set<std::string> flags;
  std::istringstream lines(text);
  std::string line;
  std::regex flag(R"((--[a-z][a-z-]*))");
  while (std::getline(lines, line)) {
    auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') continue;  // comments name other tools' flags
    if (!std::regex_search(line, relevant_line)) continue;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), flag); it != std::sregex_iterator(); ++it) {
      flags.insert((*it)[1]);
    }
  }
  return flags;
}

void expect_valid_yaml(const std::string& path) {
  auto result =
      run_command({"/usr/bin/python3", "-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))", path});
  EXPECT_EQ(result.exit_code, 0) << path << " is not valid YAML:\n" << result.output;
}

class CiTemplateTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CiTemplateTest, ParsesAndUsesOnlyRealKwFlags) {
  std::string path = std::string(KW_SOURCE_DIR "/ci/") + GetParam();
  expect_valid_yaml(path);
  std::string text = read(path);
  ASSERT_NE(text.find("kw submit"), std::string::npos) << "the template runs kw submit";
  EXPECT_NE(text.find("$KW_SERVER/download/kw.sha256"), std::string::npos) << "kw comes from kw-server";
  EXPECT_NE(text.find("sha256sum --check"), std::string::npos) << "the download is checked";
  std::string submit_help = help({KW_BINARY, "submit"});
  std::set<std::string> flags = flags_in(text, std::regex(R"(args(\+)?=|kw submit)"));
  EXPECT_GE(flags.size(), 6u);
  for (const std::string& flag : flags) {
    EXPECT_NE(submit_help.find(flag), std::string::npos)
        << GetParam() << " passes " << flag << ", unknown to kw submit";
  }
  for (const char* required : {"--project", "--commit", "--branch", "--wait", "--base"}) {
    EXPECT_TRUE(flags.contains(required)) << GetParam() << " does not pass " << required;
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, CiTemplateTest,
                         ::testing::Values("github/kernelwatch.yml", "gitlab/.gitlab-ci.yml"));

TEST(CiTemplates, GithubWorkflowRunsOnPushAndPullRequest) {
  auto result = run_command({"/usr/bin/python3", "-c",
                             "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
                             "on = d.get('on', d.get(True)); print(sorted(on))",
                             KW_SOURCE_DIR "/ci/github/kernelwatch.yml"});
  EXPECT_EQ(result.output, "['pull_request', 'pull_request_target', 'push']\n");
}

// A step's or job's shell script out of a template (python3 and PyYAML).
std::string script_of(const std::string& template_path, const std::string& python_expression) {
  auto script = run_command(
      {"/usr/bin/python3", "-c",
       "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(" + python_expression + ")",
       template_path});
  EXPECT_EQ(script.exit_code, 0) << script.output;
  return script.output;
}

const std::string kGithub = KW_SOURCE_DIR "/ci/github/kernelwatch.yml";
const std::string kGitlab = KW_SOURCE_DIR "/ci/gitlab/.gitlab-ci.yml";
const std::string kGithubStep =
    "next(s['run'] for s in d['jobs']['gate']['steps'] if '%s' in s.get('run', ''))";

std::string github_step(const std::string& containing) {
  std::string expression = kGithubStep;
  expression.replace(expression.find("%s"), 2, containing);
  return script_of(kGithub, expression);
}

// A tracked repository where main moved on after the pull request forked,
// and a `kw` TEST DOUBLE that prints its arguments, at `kw_path`.
struct StepSandbox {
  std::filesystem::path root = kw::testing::make_temp_dir("kw-ci-step");
  std::string repo = (root / "tracked").string();
  std::string fork_point, head, main_tip;

  explicit StepSandbox(const std::string& kw_path) {
    run_command({"git", "init", "-q", "-b", "main", repo});
    git({"commit", "-q", "--allow-empty", "-m", "fork point"});
    fork_point = git({"rev-parse", "HEAD"});
    git({"checkout", "-q", "-b", "feature"});
    git({"commit", "-q", "--allow-empty", "-m", "the pull request"});
    head = git({"rev-parse", "HEAD"});
    git({"checkout", "-q", "main"});
    git({"commit", "-q", "--allow-empty", "-m", "main moves on"});
    main_tip = git({"rev-parse", "HEAD"});
    std::filesystem::create_directories((root / kw_path).parent_path());
    std::ofstream(root / kw_path) << "#!/bin/sh\necho \"kw $*\"\n";
    std::filesystem::permissions(root / kw_path, std::filesystem::perms::owner_all);
  }
  ~StepSandbox() { std::filesystem::remove_all(root); }
  std::string git(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"git", "-C", repo, "-c", "user.name=kw", "-c", "user.email=kw@localhost"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = run_command(argv);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output.substr(0, result.output.find('\n'));
  }
  // Runs `script` in the sandbox with bash and these NAME=VALUE variables.
  kw::testing::CommandResult run(const std::string& script, const std::vector<std::string>& env) const {
    std::ofstream(root / "step.sh") << script;
    std::vector<std::string> argv{"env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(),
                {"bash", "-eo", "pipefail", "-c", "cd " + root.string() + " && bash -eo pipefail step.sh"});
    return run_command(argv);
  }
};

// A pull request is compared with its fork point, not main's tip; the
// waiting gate comments on the pull request and writes the job summary.
TEST(CiTemplates, GithubWorkflowComparesAPullRequestWithItsMergeBaseAndComments) {
  StepSandbox box("bin/kw");
  auto step = box.run(github_step("kw submit"),
                      {"PATH=" + (box.root / "bin").string() + ":/usr/bin:/bin", "KW_PROJECT=demo",
                       "KW_COMMIT=" + box.head, "KW_BRANCH=feature", "KW_BASE_TIP=" + box.main_tip, "KW_PR=7",
                       "GITHUB_REPOSITORY=acme/kernels", "GITHUB_STEP_SUMMARY=/tmp/summary.md"});
  EXPECT_EQ(step.exit_code, 0) << step.output;
  EXPECT_NE(step.output.find("--base " + box.fork_point + " --pr 7"), std::string::npos)
      << "fork point " << box.fork_point << ", main's tip " << box.main_tip << ":\n"
      << step.output;
  for (const char* expected :
       {"--wait --timeout 50m", "--summary /tmp/summary.md", "--github-comment acme/kernels#7"}) {
    EXPECT_NE(step.output.find(expected), std::string::npos) << expected << "\n" << step.output;
  }
}

// Async, the job only queues (kw-server's commit status is the check).
TEST(CiTemplates, GithubWorkflowAsyncOnlyQueues) {
  StepSandbox box("bin/kw");
  auto step = box.run(github_step("kw submit"),
                      {"PATH=" + (box.root / "bin").string() + ":/usr/bin:/bin", "KW_ASYNC=true",
                       "KW_PROJECT=demo", "KW_COMMIT=" + box.head, "KW_BRANCH=main",
                       "GITHUB_REPOSITORY=acme/kernels", "GITHUB_STEP_SUMMARY=/tmp/summary.md"});
  EXPECT_EQ(step.exit_code, 0) << step.output;
  EXPECT_NE(step.output.find("kw submit --project demo --commit " + box.head + " --branch main"),
            std::string::npos)
      << step.output;
  EXPECT_EQ(step.output.find("--wait"), std::string::npos) << step.output;
  EXPECT_EQ(step.output.find("--github-comment"), std::string::npos) << step.output;
}

// A push sends what it brought (github.event.before, GitLab's
// CI_COMMIT_BEFORE_SHA) so a regression can be bisected; a new branch's
// all-zero "before" sends nothing.
TEST(CiTemplates, APushSendsItsRangeForBisecting) {
  StepSandbox box("bin/kw");
  std::vector<std::string> env{"PATH=" + (box.root / "bin").string() + ":/usr/bin:/bin",
                               "KW_PROJECT=demo",
                               "KW_COMMIT=" + box.main_tip,
                               "KW_BRANCH=main",
                               "KW_BEFORE=" + box.fork_point,
                               "GITHUB_REPOSITORY=acme/kernels",
                               "GITHUB_STEP_SUMMARY=/tmp/summary.md"};
  auto push = box.run(github_step("kw submit"), env);
  EXPECT_EQ(push.exit_code, 0) << push.output;
  EXPECT_NE(push.output.find("--range-from " + box.fork_point + " --repo tracked --wait"), std::string::npos)
      << push.output;
  env[4] = "KW_BEFORE=0000000000000000000000000000000000000000";
  auto created = box.run(github_step("kw submit"), env);
  EXPECT_EQ(created.output.find("--range-from"), std::string::npos) << created.output;

  StepSandbox gitlab_box(".kw-bin/kw");
  auto gitlab = gitlab_box.run(script_of(kGitlab, "'\\n'.join(d['kernelwatch']['script'])"),
                               {"CI_PROJECT_NAME=kernels", "CI_COMMIT_SHA=" + gitlab_box.main_tip,
                                "CI_COMMIT_BRANCH=main", "CI_COMMIT_BEFORE_SHA=" + gitlab_box.fork_point});
  EXPECT_EQ(gitlab.exit_code, 0) << gitlab.output;
  EXPECT_NE(gitlab.output.find("--branch main --range-from " + gitlab_box.fork_point + " --wait"),
            std::string::npos)
      << gitlab.output;
}

// Same-repository pull requests run through pull_request; a fork's only
// through pull_request_target with the maintainer's label, where this file
// comes from the base branch and the fork's code never runs on the runner.
TEST(CiTemplates, GithubWorkflowRunsForksOnlyWithTheMaintainersLabel) {
  std::string conditions =
      script_of(kGithub, "d['jobs']['gate']['if'] + '\\n' + str(d.get('on', d.get(True)))");
  EXPECT_NE(conditions.find("github.event.label.name == 'kernelwatch'"), std::string::npos) << conditions;
  EXPECT_NE(conditions.find("'pull_request_target': {'types': ['labeled']}"), std::string::npos)
      << conditions;
  std::string steps =
      script_of(kGithub, "[s.get('run', '') + str(s.get('with', '')) for s in d['jobs']['gate']['steps']]");
  // No step builds or runs what it checks out.
  EXPECT_EQ(steps.find("cmake"), std::string::npos) << steps;
  EXPECT_EQ(steps.find("make "), std::string::npos) << steps;
  EXPECT_NE(steps.find("'persist-credentials': False"), std::string::npos) << steps;
}

TEST(CiTemplates, GitlabJobNotesTheMergeRequestAndHasAnAsyncMode) {
  StepSandbox box(".kw-bin/kw");
  const std::string script = script_of(kGitlab, "'\\n'.join(d['kernelwatch']['script'])");
  std::vector<std::string> env{"CI_PROJECT_NAME=kernels",
                               "CI_PROJECT_ID=42",
                               "CI_COMMIT_SHA=" + box.head,
                               "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME=feature",
                               "CI_MERGE_REQUEST_DIFF_BASE_SHA=" + box.fork_point,
                               "CI_MERGE_REQUEST_IID=7",
                               "KW_GITLAB_TOKEN=glpat-x"};
  auto waiting = box.run(script, env);
  EXPECT_EQ(waiting.exit_code, 0) << waiting.output;
  EXPECT_NE(
      waiting.output.find("--base " + box.fork_point + " --pr 7 --wait --timeout 50m --gitlab-note 42!7"),
      std::string::npos)
      << waiting.output;
  env.push_back("KW_ASYNC=true");
  auto async = box.run(script, env);
  EXPECT_EQ(async.exit_code, 0) << async.output;
  EXPECT_EQ(async.output.find("--wait"), std::string::npos) << async.output;
}

#ifdef KW_SERVER_BINARY
// The install steps, run as written against a real kw-server: kw
// arrives, its checksum holds, it runs. The seconds they take are printed
// (docs/PERFORMANCE.md has the timed comparison with building kw).
TEST(CiTemplates, InstallStepsFetchARunningKwFromTheServer) {
  // As a server off loopback is: reads need a token.
  kw::testing::ServerUnderTest server({"--read-token-required"});
  server.start();
  const std::string token = server.token("ci", "github");
  StepSandbox box("unused/kw");
  const std::string runner_temp = (box.root / "runner-temp").string();
  std::filesystem::create_directories(runner_temp);
  auto timed = [&](const std::string& name, const std::string& script, const std::vector<std::string>& env) {
    auto started = std::chrono::steady_clock::now();
    auto result = box.run(script, env);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << name << ": kw installed in " << seconds << " s\n";
    return result;
  };
  auto github = timed("github", github_step("/download/kw"),
                      {"KW_SERVER=" + server.url(), "KW_TOKEN=" + token, "RUNNER_TEMP=" + runner_temp,
                       "GITHUB_PATH=" + runner_temp + "/path"});
  EXPECT_EQ(github.exit_code, 0) << github.output;
  EXPECT_NE(github.output.find("kw " KW_VERSION), std::string::npos) << github.output;
  EXPECT_EQ(read(runner_temp + "/path"), runner_temp + "/kw\n");

  auto gitlab = timed("gitlab", script_of(kGitlab, "'\\n'.join(d['kernelwatch']['before_script'])"),
                      {"KW_SERVER=" + server.url(), "KW_TOKEN=" + token});
  EXPECT_EQ(gitlab.exit_code, 0) << gitlab.output;
  EXPECT_NE(gitlab.output.find("kw " KW_VERSION), std::string::npos) << gitlab.output;

  auto refused =
      box.run(github_step("/download/kw"), {"KW_SERVER=" + server.url(), "KW_TOKEN=kw_not_a_token",
                                            "RUNNER_TEMP=" + runner_temp, "GITHUB_PATH=/dev/null"});
  EXPECT_NE(refused.exit_code, 0) << "a bad token installed kw:\n" << refused.output;
  EXPECT_NE(refused.output.find("401"), std::string::npos) << refused.output;
}
#endif

TEST(CiTemplates, SystemdUnitsUseRealFlags) {
  std::string agent_unit = read(KW_SOURCE_DIR "/ci/systemd/kw-agent.service");
  std::string agent_help = help({KW_BINARY, "agent"});
  for (const std::string& flag : flags_in(agent_unit, std::regex(R"(kw agent|--repo)"))) {
    EXPECT_NE(agent_help.find(flag), std::string::npos) << "kw-agent.service passes " << flag;
  }
#ifdef KW_SERVER_BINARY
  std::string server_unit = read(KW_SOURCE_DIR "/ci/systemd/kw-server.service");
  std::string server_help = help({KW_SERVER_BINARY});
  for (const std::string& flag : flags_in(server_unit, std::regex(R"(kw-server|--public-url)"))) {
    EXPECT_NE(server_help.find(flag), std::string::npos) << "kw-server.service passes " << flag;
  }
#endif
}

}  // namespace
