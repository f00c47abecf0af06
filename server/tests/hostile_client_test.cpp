// What a hostile client must not be able to make kw-server do with what it
// stores: call into its own network through a webhook, or store one report
// twice because a number was spelled two ways. Against the real server and
// database; what a hostile client does to the HTTP server itself (bodies
// inflated, memory held) is in http_server_test.cpp.
#include <boost/asio/ip/tcp.hpp>

#include <regex>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

class HostileClientTest : public ServerTest {};

// Webhooks reach public addresses only: every spelling of a private or
// loopback host is refused at once, naming the field.
TEST_F(HostileClientTest, PrivateWebhookTargetsAreRefused) {
  http::Client admin = client(admin_token_);
  for (const char* url :
       {"http://169.254.169.254/latest/meta-data", "http://localhost:8080/", "http://[::1]/hook",
        "http://127.1/", "http://2130706433/", "http://0.0.0.0:9/", "http://metadata.google.internal/x",
        "http://10.1.2.3/hook", "http://172.16.0.1/", "http://192.168.1.1/", "http://[fd00::1]/",
        "http://[fe80::1]/", "http://[::ffff:127.0.0.1]/", "http://0x7f000001/", "http://intranet/",
        "https://hooks.localhost/", "http://LOCALHOST./"}) {
    auto answer = admin.request("PUT", "/api/v1/projects/demo/settings", json{{"webhook_url", url}}.dump());
    EXPECT_EQ(answer.status, 422) << url << ": " << answer.body;
    EXPECT_EQ(answer.json()["field"], "webhook_url") << url;
    EXPECT_EQ(answer.json()["error"], "private_webhook") << url;
  }
  EXPECT_EQ(sql("SELECT count(*) FROM projects WHERE webhook_url IS NOT NULL")[0][0].as<int>(), 0);
  EXPECT_EQ(admin
                .request("PUT", "/api/v1/projects/demo/settings",
                         json{{"webhook_url", "https://hooks.example.com/kernelwatch"}}.dump())
                .status,
            200);
}

// A URL stored while its name was public (the answer of a DNS server the
// caller controls may change) is checked again where it is connected to:
// a loopback receiver never sees a connection, and what the project shows
// says why, to its admins only.
TEST_F(HostileClientTest, AWebhookIsNeverConnectedToAPrivateAddress) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor receiver(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  receiver.non_blocking(true);
  const std::string url =
      "http://localhost:" + std::to_string(receiver.local_endpoint().port()) + "/hook?internal=1";
  sql("UPDATE projects SET webhook_url = '" + url + "' WHERE name = 'demo'");
  ReportSpec spec;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(spec)).status, 201);
  json targets;
  wait_until(
      [&] {
        targets = client(admin_token_).get("/api/v1/projects/demo").json()["notification_targets"];
        return targets.size() == 1 && targets[0].value("consecutive_failures", 0) > 0;
      },
      "the webhook's first attempt", std::chrono::seconds(15));
  EXPECT_NE(targets[0]["last_error"].get<std::string>().find("refused: the host resolves only to loopback"),
            std::string::npos)
      << targets.dump();
  boost::system::error_code ec;
  boost::asio::ip::tcp::socket accepted(io);
  receiver.accept(accepted, ec);
  EXPECT_EQ(ec, boost::asio::error::would_block) << "the receiver was connected to";
  EXPECT_FALSE(client().get("/api/v1/projects/demo").json().contains("notification_targets"))
      << "delivery errors are for admins";
  EXPECT_FALSE(client(read_token_).get("/api/v1/projects/demo").json().contains("notification_targets"));
}

// run-report.md: an integer-valued number counts as that integer, so 168.0
// and 168 are one report, stored once.
TEST_F(HostileClientTest, OneNumberWrittenTwoWaysIsOneReport) {
  ReportSpec spec;
  json report = make_report(spec);
  auto first = agent().post("/api/v1/runs", report);
  ASSERT_EQ(first.status, 201) << first.body;
  std::string text = report.dump();
  text = std::regex_replace(text, std::regex("\"registers\":168"), "\"registers\":168.0");
  ASSERT_NE(text.find("168.0"), std::string::npos);
  auto again = agent().request("POST", "/api/v1/runs", text);
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["run_id"], first.json()["run_id"]);
  EXPECT_EQ(sql("SELECT count(*) FROM runs")[0][0].as<int>(), 1);
}

}  // namespace
}  // namespace kw::server::testing
