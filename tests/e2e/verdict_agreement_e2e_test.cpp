// Every path to a verdict says the same of each case of one real pull
// request: a report measured on an H200 (base and head in one job, 7 cases,
// 2 slowed; tests/data/pr-replay-h200) sent by `kw upload`, then read back
// by the run API, compare, `kw gate --run` and the pull-request comment
// Markdown it writes.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "../support/e2e.hpp"

namespace {

using namespace kw::testing;
using nlohmann::json;

using Statuses = std::map<std::string, std::string>;  // case -> status

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Statuses candidate_statuses(const json& rows) {
  Statuses out;
  for (const json& row : rows) {
    if (row.value("kind", "time") == "time" && row.value("impl", "candidate") == "candidate")
      out[row["case"].get<std::string>()] = row["status"];
  }
  return out;
}

// The cases of each table of the comment ("**Regressed** (2)" and the rows
// under it), by the status the table stands for.
Statuses comment_statuses(const std::string& markdown) {
  const std::map<std::string, std::string> titles = {
      {"Regressed", "regression"}, {"Improved", "improvement"}, {"Inconclusive", "inconclusive"}};
  Statuses out;
  std::string status;
  std::istringstream lines(markdown);
  const std::regex row(R"(^\| `([^`]+)` \|)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("**", 0) == 0) {
      status.clear();
      for (const auto& [title, meaning] : titles)
        if (line.rfind("**" + title, 0) == 0) status = meaning;
    }
    std::smatch match;
    if (!status.empty() && std::regex_search(line, match, row)) out[match[1]] = status;
  }
  return out;
}

// The cases `kw gate` names, by what it calls them.
Statuses gate_statuses(const std::string& output, const Statuses& cases) {
  Statuses out;
  for (const auto& [name, _] : cases) {
    if (output.find("  " + name + ": ") != std::string::npos) out[name] = "regression";
    if (output.find("  inconclusive " + name + ": ") != std::string::npos) out[name] = "inconclusive";
  }
  return out;
}

Statuses only_flagged(const Statuses& all) {
  Statuses out;
  for (const auto& [name, status] : all)
    if (status != "unchanged" && status != "no-baseline") out[name] = status;
  return out;
}

TEST(VerdictAgreementE2eTest, TheRunApiCompareGateAndCommentAgreeOnARealPullRequest) {
  const fs::path work_dir = make_temp_dir("kw-e2e-agreement");
  ServerUnderTest server;
  server.start();
  server.project("demo");
  const std::string agent = server.token("agent", "gpu-hosts"), ci = server.token("ci", "ci");
  const fs::path fixture = fs::path(KW_TEST_DATA_DIR) / "pr-replay-h200" / "report.json";
  const json report = json::parse(read(fixture));

  const CommandResult upload =
      run_command({KW_BINARY, "upload", fixture.string(), "--server", server.url(), "--token", agent});
  EXPECT_EQ(upload.exit_code, 1) << upload.output;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(upload.output, id, std::regex(R"(/#/run/([0-9]+))"))) << upload.output;
  const std::string run_id = id[1];

  const json run = server.client(ci).get("/api/v1/runs/" + run_id + "?per_page=100").json();
  const Statuses on_run_page = candidate_statuses(run["comparisons"]);
  ASSERT_EQ(on_run_page.size(), 7u) << run.dump();
  for (const auto& [name, status] : on_run_page) std::cout << name << ": " << status << "\n";
  EXPECT_EQ(on_run_page.at("attention/fp16/d64/b1h1s128"), "regression");
  EXPECT_EQ(on_run_page.at("attention/bf16/d128/b1h16s16384/causal"), "regression");
  int flagged = 0;
  for (const auto& [_, status] : on_run_page) flagged += status == "regression";
  EXPECT_EQ(flagged, 2) << run.dump();

  const json compared =
      server.client(ci)
          .get("/api/v1/compare?project=demo&base=" + report["base_commit"].get<std::string>() +
               "&head=" + report["commit"].get<std::string>())
          .json();
  ASSERT_EQ(compared["gpus"].size(), 1u) << compared.dump();
  EXPECT_EQ(compared["gpus"][0]["source"], "in_job");
  EXPECT_EQ(candidate_statuses(compared["gpus"][0]["cases"]), on_run_page);

  const fs::path summary = work_dir / "comment.md";
  const CommandResult gate = run_command({KW_BINARY, "gate", "--run", run_id, "--summary", summary.string(),
                                          "--server", server.url(), "--token", ci});
  EXPECT_EQ(gate.exit_code, 1) << gate.output;
  EXPECT_EQ(gate_statuses(gate.output, on_run_page), only_flagged(on_run_page)) << gate.output;
  const std::string comment = read(summary);
  EXPECT_NE(comment.find(":x: regression"), std::string::npos) << comment;
  EXPECT_EQ(comment_statuses(comment), only_flagged(on_run_page)) << comment;

  std::error_code ec;
  fs::remove_all(work_dir, ec);
}

}  // namespace
