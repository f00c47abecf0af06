// The CI templates and unit files use only commands and flags that exist:
// both YAML files parse, and every `kw` subcommand and `--flag` they pass is in
// that subcommand's --help.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "../../tests/support/subprocess.hpp"

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
  ASSERT_NE(text.find("agent/kw submit"), std::string::npos) << "the template runs kw submit";
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
  // The build line's CMake options exist in this CMakeLists.txt.
  std::string cmake = read(KW_SOURCE_DIR "/CMakeLists.txt");
  for (const char* option : {"KW_BUILD_SERVER", "KW_BUILD_KERNELS", "KW_BUILD_TESTS"}) {
    EXPECT_NE(text.find(std::string("-D") + option + "=OFF"), std::string::npos);
    EXPECT_NE(cmake.find(std::string("option(") + option), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, CiTemplateTest,
                         ::testing::Values("github/kernelwatch.yml", "gitlab/.gitlab-ci.yml"));

TEST(CiTemplates, GithubWorkflowRunsOnPushAndPullRequest) {
  auto result = run_command({"/usr/bin/python3", "-c",
                             "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
                             "on = d.get('on', d.get(True)); print(sorted(on))",
                             KW_SOURCE_DIR "/ci/github/kernelwatch.yml"});
  EXPECT_EQ(result.output, "['pull_request', 'push']\n");
}

// #18: the workflow's submit step, run by bash as the runner would, in a
// repository where main moved on after the pull request forked: it passes
// the fork point as --base, not main's tip. `kw` is a TEST DOUBLE that
// prints its arguments.
TEST(CiTemplates, GithubWorkflowComparesAPullRequestWithItsMergeBase) {
  const std::string dir = kw::testing::run_command({"mktemp", "-d"}).output;
  const std::string root = dir.substr(0, dir.find('\n'));
  const std::string repo = root + "/tracked";
  auto git = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{"git", "-C", repo, "-c", "user.name=kw", "-c", "user.email=kw@localhost"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto result = run_command(argv);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output.substr(0, result.output.find('\n'));
  };
  run_command({"git", "init", "-q", "-b", "main", repo});
  git({"commit", "-q", "--allow-empty", "-m", "fork point"});
  const std::string fork_point = git({"rev-parse", "HEAD"});
  git({"checkout", "-q", "-b", "feature"});
  git({"commit", "-q", "--allow-empty", "-m", "the pull request"});
  const std::string head = git({"rev-parse", "HEAD"});
  git({"checkout", "-q", "main"});
  git({"commit", "-q", "--allow-empty", "-m", "main moves on"});
  const std::string main_tip = git({"rev-parse", "HEAD"});
  std::filesystem::create_directories(root + "/.kernelwatch/build/agent");
  std::ofstream(root + "/.kernelwatch/build/agent/kw") << "#!/bin/sh\necho \"kw $*\"\n";
  std::filesystem::permissions(root + "/.kernelwatch/build/agent/kw", std::filesystem::perms::owner_all);

  auto script = run_command(
      {"/usr/bin/python3", "-c",
       "import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); "
       "print(next(s['run'] for s in d['jobs']['gate']['steps'] if 'kw submit' in s.get('run', '')))",
       KW_SOURCE_DIR "/ci/github/kernelwatch.yml"});
  ASSERT_EQ(script.exit_code, 0) << script.output;
  std::ofstream(root + "/step.sh") << script.output;
  auto step =
      run_command({"env", "KW_PROJECT=demo", "KW_COMMIT=" + head, "KW_BRANCH=feature",
                   "KW_BASE_TIP=" + main_tip, "KW_PR=7", "bash", "-c", "cd " + root + " && bash step.sh"});
  EXPECT_EQ(step.exit_code, 0) << step.output;
  EXPECT_NE(step.output.find("--base " + fork_point + " --pr 7"), std::string::npos)
      << "fork point " << fork_point << ", main's tip " << main_tip << ":\n"
      << step.output;
  std::filesystem::remove_all(root);
}

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
