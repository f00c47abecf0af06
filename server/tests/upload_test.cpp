// Run reports sent in parts (docs/api.md, "Reports in parts"), through the
// routes over the in-memory store: the parts kept until the upload is
// completed, the run stored whole or not at all, an upload its token's, the
// quotas and the limit of one report. How PostgreSQL keeps them (as sent,
// and expired) is tested on it (upload_pg_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "kw/common/sha256.hpp"
#include "report_parts.hpp"
#include "routed_server.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using nlohmann::json;

class UploadTest : public RoutedServerTest {
 protected:
  static constexpr const char* kUpload = "/api/v1/projects/demo/uploads/upload-0001";
  explicit UploadTest(UploadLimits limits = {}) : RoutedServerTest({}, limits) {}
  std::size_t runs() { return store_.runs_stored(); }
};

TEST_F(UploadTest, PartsBecomeOneRunOnlyWhenCompleted) {
  const json report = fifty_cases(1);
  const std::vector<json> parts = split(report, 3);
  RoutedClient agent = this->agent();
  ASSERT_EQ(put_part(agent, kUpload, 2, 3, parts[2]).status, 200);
  auto second = put_part(agent, kUpload, 0, 3, parts[0]);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["received"], json::array({0, 2}));
  EXPECT_EQ(second.json()["parts"], 3);

  auto early = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(early.status, 409) << early.body;
  EXPECT_EQ(early.json()["error"], "upload_incomplete");
  EXPECT_EQ(early.json()["message"], "upload upload-0001: 1 of 3 parts have not arrived (1)");
  EXPECT_EQ(runs(), 0u) << "nothing of the run is stored before the upload is completed";

  ASSERT_EQ(put_part(agent, kUpload, 1, 3, parts[1]).status, 200);
  auto stored = agent.request("POST", kUpload, "{}");
  ASSERT_EQ(stored.status, 201) << stored.body;
  const std::int64_t run_id = stored.json()["run_id"].get<std::int64_t>();
  EXPECT_EQ(stored.json()["verdict"], "pass");

  json run = agent.get("/api/v1/runs/" + std::to_string(run_id) + "?per_page=100").json();
  ASSERT_EQ(run["cases"].size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(run["cases"][i]["name"], report["cases"][i]["name"]) << i;
  // The same report as posted whole: the one run already stored.
  auto whole = agent.request("POST", "/api/v1/runs", http::gzip_compress(report.dump()),
                             {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json()["run_id"], run_id);

  auto again = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["run_id"], run_id);
  EXPECT_TRUE(again.json()["duplicate"].get<bool>());
  json state = agent.get(kUpload).json();
  EXPECT_EQ(state["run_id"], run_id);
  EXPECT_EQ(state["received"], json::array()) << "parts dropped once stored";
  EXPECT_EQ(runs(), 1u);

  auto late = put_part(agent, kUpload, 1, 3, parts[1]);
  EXPECT_EQ(late.status, 409);
  EXPECT_EQ(late.json()["error"], "upload_completed");
}

TEST_F(UploadTest, PartsAreCheckedAsTheyArrive) {
  const std::vector<json> parts = split(fifty_cases(2), 2);
  RoutedClient agent = this->agent();
  ASSERT_EQ(put_part(agent, kUpload, 0, 2, parts[0]).status, 200);

  auto other_count = put_part(agent, kUpload, 1, 3, parts[1]);
  EXPECT_EQ(other_count.status, 409);
  EXPECT_EQ(other_count.json()["message"], "upload upload-0001 was begun with 2 parts, not 3");
  auto past_end = put_part(agent, kUpload, 2, 2, parts[1]);
  EXPECT_EQ(past_end.status, 400);
  EXPECT_EQ(past_end.json()["message"], "part: \"2\" is not a part number from 0 to 1");
  auto no_count = agent.request("PUT", std::string(kUpload) + "/parts/1", parts[1].dump());
  EXPECT_EQ(no_count.status, 400);
  EXPECT_EQ(no_count.json()["message"], "of: the upload's number of parts, 1 to 1000, is required");
  auto odd_name = put_part(agent, "/api/v1/projects/demo/uploads/a.b", 0, 1, parts[0]);
  EXPECT_EQ(odd_name.status, 400);

  json more = parts[1];
  more["commit"] = make_commit(3);
  auto extra_key = put_part(agent, kUpload, 1, 2, more);
  EXPECT_EQ(extra_key.status, 422);
  EXPECT_EQ(extra_key.json()["message"], "commit: a part after the first holds only \"cases\"");
  auto no_cases = put_part(agent, kUpload, 1, 2, json::object());
  EXPECT_EQ(no_cases.status, 422);
  EXPECT_EQ(no_cases.json()["field"], "cases");

  store_.create_project("other", "main");
  auto elsewhere = put_part(agent, "/api/v1/projects/other/uploads/upload-0001", 0, 2, parts[0]);
  EXPECT_EQ(elsewhere.status, 422);
  EXPECT_EQ(elsewhere.json()["message"], "project: is \"demo\" but the upload is to project \"other\"");
  auto missing = put_part(agent, "/api/v1/projects/nowhere/uploads/upload-0001", 1, 2, parts[1]);
  EXPECT_EQ(missing.status, 404);
  RoutedClient scoped =
      client(store_.create_token("other-agent", Scope::agent, std::vector<std::string>{"other"}).first);
  EXPECT_EQ(put_part(scoped, kUpload, 1, 2, parts[1]).status, 403);
  EXPECT_EQ(scoped.get(kUpload).status, 403);
  EXPECT_EQ(client(ci_token_).get(kUpload).status, 403);
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/upload-0002").status, 404);

  json state = agent.get(kUpload).json();
  EXPECT_EQ(state["received"], json::array({0})) << "no refused part was kept";
  EXPECT_EQ(runs(), 0u);
}

TEST_F(UploadTest, AReportItsPartsBreakIsRefusedWithNothingStored) {
  std::vector<json> parts = split(fifty_cases(4), 2);
  parts[1]["cases"][0]["name"] = parts[0]["cases"][0]["name"];
  RoutedClient agent = this->agent();
  ASSERT_EQ(put_part(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put_part(agent, kUpload, 1, 2, parts[1]).status, 200);
  auto refused = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(refused.json()["error"], "duplicate");
  EXPECT_EQ(refused.json()["field"], "cases[25].name");
  EXPECT_EQ(runs(), 0u);
}

// Another token of the same project, even an agent token, neither sees nor
// changes nor completes an upload it did not begin.
TEST_F(UploadTest, AnUploadBelongsToTheTokenThatBeganIt) {
  const std::vector<json> parts = split(fifty_cases(7), 2);
  RoutedClient agent = this->agent();
  RoutedClient other = client(store_.create_token("agent-2", Scope::agent, std::nullopt).first);
  ASSERT_EQ(put_part(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put_part(agent, kUpload, 1, 2, parts[1]).status, 200);
  json forged = parts[1];
  forged["cases"][0]["measurements"][0]["samples_ns"][0] = 1.0;
  for (const http::Response& refused :
       {other.get(kUpload), put_part(other, kUpload, 1, 2, forged), other.request("POST", kUpload, "{}")}) {
    EXPECT_EQ(refused.status, 404) << refused.body;
    EXPECT_EQ(refused.json()["error"], "no_such_upload");
  }
  const json state = agent.get(kUpload).json();
  ASSERT_EQ(state["held"].size(), 2u);
  EXPECT_EQ(state["held"][1]["sha256"], common::sha256_hex(parts[1].dump()))
      << "the part sent, not the forged one";
  EXPECT_EQ(state["held"][1]["bytes"], parts[1].dump().size());
  EXPECT_EQ(agent.request("POST", kUpload, "{}").status, 201);
  EXPECT_EQ(runs(), 1u);
}

// Completions racing each other and replacements of parts: every upload
// makes one run, never two.
TEST_F(UploadTest, OneUploadIsOneRunWhateverRacesIt) {
  constexpr int kUploads = 25;
  std::atomic<int> server_errors{0};
  for (int u = 0; u < kUploads; ++u) {
    const std::string upload = "/api/v1/projects/demo/uploads/race-" + std::to_string(1000 + u);
    json report = fifty_cases(100 + static_cast<std::uint64_t>(u));
    const std::vector<json> parts = split(report, 2);
    RoutedClient agent = this->agent();
    ASSERT_EQ(put_part(agent, upload, 0, 2, parts[0]).status, 200);
    ASSERT_EQ(put_part(agent, upload, 1, 2, parts[1]).status, 200);
    std::vector<std::thread> racers;
    for (int r = 0; r < 5; ++r) {
      racers.emplace_back([&, r] {
        RoutedClient mine = this->agent();
        http::Response answer;
        if (r % 2 == 0) {
          answer = mine.request("POST", upload, "{}");
        } else {
          json replaced = parts[1];
          replaced["cases"][0]["measurements"][0]["samples_ns"][0] = 1000.0 + r;
          answer = put_part(mine, upload, 1, 2, replaced);
        }
        if (answer.status >= 500) ++server_errors;
      });
    }
    for (auto& racer : racers) racer.join();
    auto last = agent.request("POST", upload, "{}");  // completes it if no racer did
    EXPECT_LT(last.status, 300) << last.body;
  }
  EXPECT_EQ(server_errors.load(), 0);
  EXPECT_EQ(runs(), static_cast<std::size_t>(kUploads));
}

class SmallUploadQuota : public UploadTest {
 protected:
  static UploadLimits limits() {
    UploadLimits limits;
    limits.quota.uploads_per_token = 3;
    limits.quota.bytes_per_token = 2 << 20;
    return limits;
  }
  SmallUploadQuota() : UploadTest(limits()) {}
};

TEST_F(SmallUploadQuota, OpenUploadsAreHeldToTheTokensQuota) {
  const std::vector<json> parts = split(fifty_cases(8), 2);
  RoutedClient agent = this->agent();
  for (int u = 0; u < 3; ++u)
    ASSERT_EQ(
        put_part(agent, "/api/v1/projects/demo/uploads/quota-000" + std::to_string(u), 0, 2, parts[0]).status,
        200);
  auto fourth = put_part(agent, "/api/v1/projects/demo/uploads/quota-0003", 0, 2, parts[0]);
  EXPECT_EQ(fourth.status, 429) << fourth.body;
  EXPECT_EQ(fourth.json()["error"], "too_many_uploads");
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/quota-0003").status, 404) << "nothing kept of it";
  EXPECT_EQ(put_part(agent, "/api/v1/projects/demo/uploads/quota-0000", 1, 2, parts[1]).status, 200)
      << "an open upload still takes its parts";
  // Parts whose bytes as sent pass the quota: incompressible text.
  json noise = parts[1];
  std::mt19937_64 rng(1);
  // 62 symbols: about 6 bits a byte after gzip, so 1.2 MiB of it sent.
  static const std::string kSymbols = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string text(std::size_t{1600} * 1024, 'x');
  for (char& c : text) c = kSymbols[rng() % kSymbols.size()];
  noise["cases"][0]["name"] = text;
  ASSERT_EQ(put_part(agent, "/api/v1/projects/demo/uploads/quota-0001", 1, 2, noise).status, 200);
  auto full = put_part(agent, "/api/v1/projects/demo/uploads/quota-0002", 1, 2, noise);
  EXPECT_EQ(full.status, 507) << full.body;
  EXPECT_EQ(full.json()["error"], "upload_quota");
}

class SmallReportLimit : public UploadTest {
 protected:
  static UploadLimits limits() {
    UploadLimits limits;
    limits.report_bytes = std::size_t{32} * 1024;
    return limits;
  }
  SmallReportLimit() : UploadTest(limits()) {}
};

TEST_F(SmallReportLimit, PartsTogetherAreHeldToTheLimitOfOneReport) {
  const json report = fifty_cases(6);
  const std::size_t size = report.dump().size();
  ASSERT_GT(size, 32u * 1024);
  const std::vector<json> parts = split(report, size / (std::size_t{20} * 1024) + 2);
  RoutedClient agent = this->agent();
  http::Response answer;
  std::size_t sent = 0;
  for (; sent < parts.size(); ++sent) {
    answer = put_part(agent, kUpload, sent, parts.size(), parts[sent]);
    if (answer.status != 200) break;
  }
  ASSERT_LT(sent, parts.size()) << "the parts together pass the limit";
  EXPECT_EQ(answer.status, 413) << answer.body;
  EXPECT_NE(answer.json()["message"].get<std::string>().find("more than the limit of 32768 for one report"),
            std::string::npos)
      << answer.body;
}

}  // namespace
}  // namespace kw::server::testing
