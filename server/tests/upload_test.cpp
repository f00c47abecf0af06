// Run reports sent in parts (docs/api.md, "Reports in parts"): the parts kept
// until the upload is completed, the run stored whole or not at all.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "../../tests/support/report_factory.hpp"
#include "kw/common/sha256.hpp"
#include "kw/http/gzip.hpp"
#include "server_fixture.hpp"
#include "store/upload_repository.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

// The report as `count` parts: the first every field and the first cases,
// the others {"cases": [...]}.
std::vector<json> split(const json& report, std::size_t count) {
  std::vector<json> parts;
  const json& cases = report["cases"];
  for (std::size_t k = 0; k < count; ++k) {
    json part = k == 0 ? report : json::object();
    part["cases"] = json::array();
    for (std::size_t i = cases.size() * k / count; i < cases.size() * (k + 1) / count; ++i)
      part["cases"].push_back(cases[i]);
    parts.push_back(std::move(part));
  }
  return parts;
}

json fifty_cases(std::uint64_t commit) {
  ReportSpec spec;
  spec.commit = make_commit(commit);
  spec.cases = 50;
  spec.replicates = 2;
  spec.samples = 10;
  return make_report(spec);
}

class UploadTest : public ServerTest {
 protected:
  static constexpr const char* kUpload = "/api/v1/projects/demo/uploads/upload-0001";

  http::Response put(http::Client& client, const std::string& upload, std::size_t part, std::size_t of,
                     const json& body) {
    return client.request("PUT", upload + "/parts/" + std::to_string(part) + "?of=" + std::to_string(of),
                          http::gzip_compress(body.dump()), {{"Content-Encoding", "gzip"}});
  }
  std::size_t runs() { return sql("SELECT count(*) FROM runs")[0][0].as<std::size_t>(); }
};

TEST_F(UploadTest, PartsBecomeOneRunOnlyWhenCompleted) {
  const json report = fifty_cases(1);
  const std::vector<json> parts = split(report, 3);
  http::Client agent = this->agent();
  ASSERT_EQ(put(agent, kUpload, 2, 3, parts[2]).status, 200);
  auto second = put(agent, kUpload, 0, 3, parts[0]);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.json()["received"], json::array({0, 2}));
  EXPECT_EQ(second.json()["parts"], 3);

  auto early = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(early.status, 409) << early.body;
  EXPECT_EQ(early.json()["error"], "upload_incomplete");
  EXPECT_EQ(early.json()["message"], "upload upload-0001: 1 of 3 parts have not arrived (1)");
  EXPECT_EQ(runs(), 0u) << "nothing of the run is stored before the upload is completed";

  ASSERT_EQ(put(agent, kUpload, 1, 3, parts[1]).status, 200);
  auto stored = agent.request("POST", kUpload, "{}");
  ASSERT_EQ(stored.status, 201) << stored.body;
  const std::int64_t run_id = stored.json()["run_id"].get<std::int64_t>();
  EXPECT_EQ(stored.json()["verdict"], "pass");

  json run = agent.get("/api/v1/runs/" + std::to_string(run_id) + "?per_page=100").json();
  ASSERT_EQ(run["cases"].size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(run["cases"][i]["name"], report["cases"][i]["name"]) << i;
  // The same report as posted whole: the one run already stored.
  auto whole = agent.post_gzip("/api/v1/runs", report);
  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json()["run_id"], run_id);

  auto again = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["run_id"], run_id);
  EXPECT_TRUE(again.json()["duplicate"].get<bool>());
  json state = agent.get(kUpload).json();
  EXPECT_EQ(state["run_id"], run_id);
  EXPECT_EQ(sql("SELECT count(*) FROM upload_parts")[0][0].as<int>(), 0) << "parts dropped once stored";
  EXPECT_EQ(runs(), 1u);

  auto late = put(agent, kUpload, 1, 3, parts[1]);
  EXPECT_EQ(late.status, 409);
  EXPECT_EQ(late.json()["error"], "upload_completed");
}

TEST_F(UploadTest, PartsAreCheckedAsTheyArrive) {
  const std::vector<json> parts = split(fifty_cases(2), 2);
  http::Client agent = this->agent();
  ASSERT_EQ(put(agent, kUpload, 0, 2, parts[0]).status, 200);

  auto other_count = put(agent, kUpload, 1, 3, parts[1]);
  EXPECT_EQ(other_count.status, 409);
  EXPECT_EQ(other_count.json()["message"], "upload upload-0001 was begun with 2 parts, not 3");
  auto past_end = put(agent, kUpload, 2, 2, parts[1]);
  EXPECT_EQ(past_end.status, 400);
  EXPECT_EQ(past_end.json()["message"], "part: \"2\" is not a part number from 0 to 1");
  auto no_count = agent.request("PUT", std::string(kUpload) + "/parts/1", parts[1].dump());
  EXPECT_EQ(no_count.status, 400);
  EXPECT_EQ(no_count.json()["message"], "of: the upload's number of parts, 1 to 1000, is required");
  auto odd_name = put(agent, "/api/v1/projects/demo/uploads/a.b", 0, 1, parts[0]);
  EXPECT_EQ(odd_name.status, 400);

  json more = parts[1];
  more["commit"] = make_commit(3);
  auto extra_key = put(agent, kUpload, 1, 2, more);
  EXPECT_EQ(extra_key.status, 422);
  EXPECT_EQ(extra_key.json()["message"], "commit: a part after the first holds only \"cases\"");
  auto no_cases = put(agent, kUpload, 1, 2, json::object());
  EXPECT_EQ(no_cases.status, 422);
  EXPECT_EQ(no_cases.json()["field"], "cases");

  create_project("other");
  auto elsewhere = put(agent, "/api/v1/projects/other/uploads/upload-0001", 0, 2, parts[0]);
  EXPECT_EQ(elsewhere.status, 422);
  EXPECT_EQ(elsewhere.json()["message"], "project: is \"demo\" but the upload is to project \"other\"");
  auto missing = put(agent, "/api/v1/projects/nowhere/uploads/upload-0001", 1, 2, parts[1]);
  EXPECT_EQ(missing.status, 404);
  http::Client scoped(base_url_, create_token(database_->url(), "other-agent", Scope::agent,
                                              std::vector<std::string>{"other"}));
  EXPECT_EQ(put(scoped, kUpload, 1, 2, parts[1]).status, 403);
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
  http::Client agent = this->agent();
  ASSERT_EQ(put(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put(agent, kUpload, 1, 2, parts[1]).status, 200);
  auto refused = agent.request("POST", kUpload, "{}");
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_EQ(refused.json()["error"], "duplicate");
  EXPECT_EQ(refused.json()["field"], "cases[25].name");
  EXPECT_EQ(runs(), 0u);
}

// Incomplete uploads go after their expiry (an hour by default), completed
// ones after a day (their answer serves a resend until then).
TEST_F(UploadTest, IncompleteUploadsExpireSoonAndCompletedOnesAfterADay) {
  const std::vector<json> parts = split(fifty_cases(5), 2);
  const std::vector<json> whole = split(fifty_cases(6), 1);
  http::Client agent = this->agent();
  ASSERT_EQ(put(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put(agent, "/api/v1/projects/demo/uploads/upload-0002", 0, 2, parts[0]).status, 200);
  for (const char* done : {"upload-0003", "upload-0004"}) {
    const std::string upload = std::string("/api/v1/projects/demo/uploads/") + done;
    ASSERT_EQ(put(agent, upload, 0, 1, whole[0]).status, 200);
    ASSERT_LT(agent.request("POST", upload, "{}").status, 300);
  }
  sql("UPDATE uploads SET touched_at = now() - interval '61 minutes' WHERE id IN ('upload-0001', "
      "'upload-0003')");
  sql("UPDATE uploads SET touched_at = now() - interval '25 hours' WHERE id = 'upload-0004'");
  pqxx::connection connection(database_->url());
  pqxx::work tx(connection);
  EXPECT_EQ(UploadRepository::expire(tx, 60), 2);
  tx.commit();
  EXPECT_EQ(agent.get(kUpload).status, 404);
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/upload-0002").status, 200);
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/upload-0003").status, 200) << "completed, kept a day";
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/upload-0004").status, 404);
  EXPECT_EQ(sql("SELECT count(*) FROM upload_parts")[0][0].as<int>(), 1);
}

// Another token of the same project, even an agent token, neither sees nor
// changes nor completes an upload it did not begin.
TEST_F(UploadTest, AnUploadBelongsToTheTokenThatBeganIt) {
  const std::vector<json> parts = split(fifty_cases(7), 2);
  http::Client agent = this->agent();
  http::Client other(base_url_, create_token(database_->url(), "agent-2", Scope::agent));
  ASSERT_EQ(put(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put(agent, kUpload, 1, 2, parts[1]).status, 200);
  json forged = parts[1];
  forged["cases"][0]["measurements"][0]["samples_ns"][0] = 1.0;
  for (const http::Response& refused :
       {other.get(kUpload), put(other, kUpload, 1, 2, forged), other.request("POST", kUpload, "{}")}) {
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
    http::Client agent = this->agent();
    ASSERT_EQ(put(agent, upload, 0, 2, parts[0]).status, 200);
    ASSERT_EQ(put(agent, upload, 1, 2, parts[1]).status, 200);
    std::vector<std::thread> racers;
    for (int r = 0; r < 5; ++r) {
      racers.emplace_back([&, r] {
        http::Client mine = this->agent();
        http::Response answer;
        if (r % 2 == 0) {
          answer = mine.request("POST", upload, "{}");
        } else {
          json replaced = parts[1];
          replaced["cases"][0]["measurements"][0]["samples_ns"][0] = 1000.0 + r;
          answer = put(mine, upload, 1, 2, replaced);
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
  EXPECT_EQ(sql("SELECT count(DISTINCT run_id) FROM uploads")[0][0].as<int>(), kUploads);
}

class SmallUploadQuota : public UploadTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = UploadTest::server_options();
    options.uploads.uploads_per_token = 3;
    options.uploads.bytes_per_token = 2 << 20;
    return options;
  }
};

TEST_F(SmallUploadQuota, OpenUploadsAreHeldToTheTokensQuota) {
  const std::vector<json> parts = split(fifty_cases(8), 2);
  http::Client agent = this->agent();
  for (int u = 0; u < 3; ++u)
    ASSERT_EQ(
        put(agent, "/api/v1/projects/demo/uploads/quota-000" + std::to_string(u), 0, 2, parts[0]).status,
        200);
  auto fourth = put(agent, "/api/v1/projects/demo/uploads/quota-0003", 0, 2, parts[0]);
  EXPECT_EQ(fourth.status, 429) << fourth.body;
  EXPECT_EQ(fourth.json()["error"], "too_many_uploads");
  EXPECT_EQ(agent.get("/api/v1/projects/demo/uploads/quota-0003").status, 404) << "nothing kept of it";
  EXPECT_EQ(put(agent, "/api/v1/projects/demo/uploads/quota-0000", 1, 2, parts[1]).status, 200)
      << "an open upload still takes its parts";
  // Parts whose bytes as sent pass the quota: incompressible text.
  json noise = parts[1];
  std::mt19937_64 rng(1);
  // 62 symbols: about 6 bits a byte after gzip, so 1.2 MiB of it sent.
  static const std::string kSymbols = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string text(std::size_t{1600} * 1024, 'x');
  for (char& c : text) c = kSymbols[rng() % kSymbols.size()];
  noise["cases"][0]["name"] = text;
  ASSERT_EQ(put(agent, "/api/v1/projects/demo/uploads/quota-0001", 1, 2, noise).status, 200);
  auto full = put(agent, "/api/v1/projects/demo/uploads/quota-0002", 1, 2, noise);
  EXPECT_EQ(full.status, 507) << full.body;
  EXPECT_EQ(full.json()["error"], "upload_quota");
  std::string metrics;
  wait_until(
      [&] {
        metrics = client().get("/metrics").body;
        return metric_value(metrics, "kw_uploads_open") == 3;
      },
      "the open uploads on /metrics");
  EXPECT_GT(metric_value(metrics, "kw_upload_bytes{form=\"stored\"}"), 1000 * 1024);
}

// Parts of the worst ratio (a kilobyte of gzip per megabyte of JSON) are
// stored as sent: those one token may open take a few hundred kilobytes, not
// the 128 MiB they decode to, and twice as many more past the quota are
// refused.
TEST_F(UploadTest, PartsAreStoredAsSentAndHeldToTheQuota) {
  const std::string padded = "{\"cases\":[]" + std::string(std::size_t{16} << 20, ' ') + "}";
  const std::string bomb = http::gzip_compress(padded, 9);
  ASSERT_LT(bomb.size(), std::size_t{64} * 1024);
  auto size = [&] { return sql("SELECT pg_database_size(current_database())")[0][0].as<std::int64_t>(); };
  const std::int64_t before = size();
  http::Client agent = this->agent();
  const int quota = UploadQuota{}.uploads_per_token, attempts = 3 * quota;
  int accepted = 0, refused = 0;
  for (int u = 0; u < attempts; ++u) {
    const std::string upload = "/api/v1/projects/demo/uploads/bomb-" + std::to_string(1000 + u);
    auto answer = agent.request("PUT", upload + "/parts/0?of=2", bomb, {{"Content-Encoding", "gzip"}});
    if (answer.status == 200) ++accepted;
    if (answer.status == 429) ++refused;
  }
  EXPECT_EQ(accepted, quota);
  EXPECT_EQ(accepted + refused, attempts);
  EXPECT_LT(size() - before, std::int64_t{32} << 20);
  EXPECT_EQ(sql("SELECT max(octet_length(data)) FROM upload_parts")[0][0].as<std::size_t>(), bomb.size());
}

class SmallReportLimit : public UploadTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = UploadTest::server_options();
    options.http.decoded_body_limit = std::size_t{32} * 1024;
    return options;
  }
};

TEST_F(SmallReportLimit, PartsTogetherAreHeldToTheLimitOfOneReport) {
  const json report = fifty_cases(6);
  const std::size_t size = report.dump().size();
  ASSERT_GT(size, 32u * 1024);
  const std::vector<json> parts = split(report, size / (std::size_t{20} * 1024) + 2);
  http::Client agent = this->agent();
  http::Response answer;
  std::size_t sent = 0;
  for (; sent < parts.size(); ++sent) {
    answer = put(agent, kUpload, sent, parts.size(), parts[sent]);
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
