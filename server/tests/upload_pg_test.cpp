// How kw-server's PostgreSQL keeps reports sent in parts: as sent (gzip),
// held to the quota however far they would inflate, counted on /metrics,
// and expired. Their rules are tested through the routes over the
// in-memory store (upload_test.cpp).
#include <gtest/gtest.h>

#include "kw/http/gzip.hpp"
#include "report_parts.hpp"
#include "server_fixture.hpp"
#include "store/upload_repository.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

class UploadPgTest : public ServerTest {
 protected:
  static constexpr const char* kUpload = "/api/v1/projects/demo/uploads/upload-0001";
};

// Incomplete uploads go after their expiry (an hour by default), completed
// ones after a day (their answer serves a resend until then).
TEST_F(UploadPgTest, IncompleteUploadsExpireSoonAndCompletedOnesAfterADay) {
  const std::vector<json> parts = split(fifty_cases(5), 2);
  const std::vector<json> whole = split(fifty_cases(6), 1);
  http::Client agent = this->agent();
  ASSERT_EQ(put_part(agent, kUpload, 0, 2, parts[0]).status, 200);
  ASSERT_EQ(put_part(agent, "/api/v1/projects/demo/uploads/upload-0002", 0, 2, parts[0]).status, 200);
  for (const char* done : {"upload-0003", "upload-0004"}) {
    const std::string upload = std::string("/api/v1/projects/demo/uploads/") + done;
    ASSERT_EQ(put_part(agent, upload, 0, 1, whole[0]).status, 200);
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

// Parts of the worst ratio (a kilobyte of gzip per megabyte of JSON) are
// stored as sent: those one token may open take a few hundred kilobytes, not
// the 128 MiB they decode to, and twice as many more past the quota are
// refused.
TEST_F(UploadPgTest, PartsAreStoredAsSentAndHeldToTheQuota) {
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
  std::string metrics;
  wait_until(
      [&] {
        metrics = client().get("/metrics").body;
        return metric_value(metrics, "kw_uploads_open") == quota;
      },
      "the open uploads on /metrics");
  EXPECT_GT(metric_value(metrics, "kw_upload_bytes{form=\"stored\"}"), 0);
}

}  // namespace
}  // namespace kw::server::testing
