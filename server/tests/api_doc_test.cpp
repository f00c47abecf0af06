// Replays every curl example of docs/api.md, in order, against a fresh server
// and checks the status each `# -> NNN` line promises.
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "../../tests/support/subprocess.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

struct Example {
  std::string command;
  int expected_status;
  int line;
};

std::vector<Example> read_examples(const std::string& path) {
  std::ifstream in(path);
  std::vector<Example> examples;
  std::string line, command;
  bool in_shell = false;
  int number = 0, command_line = 0;
  std::regex status_line(R"(^# -> (\d{3})$)");
  while (std::getline(in, line)) {
    ++number;
    if (line == "```sh") {
      in_shell = true;
      continue;
    }
    if (in_shell && line == "```") {
      in_shell = false;
      continue;
    }
    if (!in_shell) continue;
    std::smatch match;
    if (std::regex_match(line, match, status_line)) {
      examples.push_back({command, std::stoi(match[1]), command_line});
      command.clear();
    } else {
      if (command.empty()) command_line = number;
      command += line + "\n";
    }
  }
  return examples;
}

class ApiDocTest : public ServerTest {};

TEST_F(ApiDocTest, EveryExampleAnswersAsDocumented) {
  std::vector<Example> examples = read_examples(KW_SOURCE_DIR "/docs/api.md");
  ASSERT_GE(examples.size(), 20u);
  for (const Example& example : examples) {
    // curl wrapped so the example text stays as a reader would type it.
    std::string script = "cd '" KW_SOURCE_DIR "' && export KW='" + base_url_ + "' AGENT_TOKEN='" +
                         agent_token_ + "' CI_TOKEN='" + ci_token_ + "' ADMIN_TOKEN='" + admin_token_ +
                         "' && curl() { command curl -sS -o /dev/null -w '%{http_code}\\n' \"$@\"; } && " +
                         example.command;
    auto result = kw::testing::run_command({"/bin/bash", "-c", script});
    ASSERT_EQ(result.exit_code, 0) << "docs/api.md:" << example.line << "\n"
                                   << example.command << result.output;
    EXPECT_EQ(result.output, std::to_string(example.expected_status) + "\n")
        << "docs/api.md:" << example.line << "\n"
        << example.command;
  }
}

}  // namespace
}  // namespace kw::server::testing
