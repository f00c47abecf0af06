// Verdict notifications against a GITHUB API TEST DOUBLE: a local HTTP server
// (kw-server's own HttpServer with a recording handler) standing in for
// api.github.com and for a webhook receiver; there is no internet here.
#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>

#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "kw/common/sha256.hpp"
#include "notify/outbound_http.hpp"
#include "server_fixture.hpp"

namespace kw::server::testing {
namespace {

using kw::testing::make_commit;
using kw::testing::make_report;
using kw::testing::ReportSpec;
using nlohmann::json;

// Records every request; answers 500 to the first `fail_first` of them.
class GithubApiTestDouble {
 public:
  explicit GithubApiTestDouble(int fail_first = 0) : fail_first_(fail_first) {
    HttpOptions options;
    options.port = 0;
    options.threads = 1;
    server_ = std::make_unique<HttpServer>(options, [this](Request& request) {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      if (static_cast<int>(requests_.size()) <= fail_first_) {
        return Response::json(500, {{"message", "test double: failing on purpose"}});
      }
      return Response::json(201, {{"id", requests_.size()}});
    });
    server_->start();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }

  // Waits until `count` requests matching `filter` arrived; returns them.
  std::vector<Request> wait_for(std::size_t count, const std::function<bool(const Request&)>& filter,
                                std::chrono::seconds timeout = std::chrono::seconds(30)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::vector<Request> matching;
      {
        std::lock_guard lock(mutex_);
        for (const Request& r : requests_) {
          if (filter(r)) matching.push_back(r);
        }
      }
      if (matching.size() >= count || std::chrono::steady_clock::now() > deadline) return matching;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  int fail_first_;
  std::mutex mutex_;
  std::vector<Request> requests_;
  std::unique_ptr<HttpServer> server_;
};

class NotificationTest : public ServerTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = ServerTest::server_options();
    options.notifications.github_api = github_.url();
    options.notifications.github_token = "ghs-test-token";
    options.notifications.gitlab_api = gitlab_.url() + "/api/v4";
    options.notifications.gitlab_token = "glpat-test-token";
    options.notifications.webhook_secret = "s3cret";
    options.notifications.public_url = "https://kernelwatch.example.com";
    options.notifications.poll_seconds = 0.1;
    // The webhook receivers here are test doubles on loopback.
    options.notifications.allow_private_webhooks = true;
    return options;
  }
  void configure(const json& settings) {
    auto response = client(admin_token_).request("PUT", "/api/v1/projects/demo/settings", settings.dump());
    ASSERT_EQ(response.status, 200) << response.body;
  }

  GithubApiTestDouble github_{0};
  GithubApiTestDouble gitlab_{0};  // the same recorder, standing in for GitLab
};

TEST_F(NotificationTest, CommitStatusPendingWhenQueuedThenFailureOnRegression) {
  configure({{"github_repo", "acme/kernels"}});
  json base = agent().post("/api/v1/runs", make_report({})).json();  // baseline on main
  std::string sha = make_commit(77);
  std::int64_t job =
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", sha}, {"branch", "pr-3"}}).json()["id"];
  std::string path = "/repos/acme/kernels/statuses/" + sha;
  auto on_sha = [&](const Request& r) { return r.path == path; };
  std::vector<Request> pending = github_.wait_for(1, on_sha);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].method, "POST");
  EXPECT_EQ(pending[0].authorization, "Bearer ghs-test-token");
  EXPECT_EQ(pending[0].headers["accept"], "application/vnd.github+json");
  json pending_body = json::parse(pending[0].body);
  EXPECT_EQ(pending_body["state"], "pending");
  EXPECT_EQ(pending_body["context"], "kernelwatch");
  EXPECT_EQ(pending_body["target_url"], "https://kernelwatch.example.com/#/job/" + std::to_string(job));

  agent().post("/api/v1/agents/claim", {{"agent", "gpu-host-1"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}});
  ReportSpec slower;
  slower.commit = sha;
  slower.slowdown = 1.25;
  slower.seed = 5;
  json answer = agent().post("/api/v1/jobs/" + std::to_string(job) + "/report", make_report(slower)).json();
  ASSERT_EQ(answer["verdict"], "regression");
  std::vector<Request> statuses = github_.wait_for(2, on_sha);
  ASSERT_EQ(statuses.size(), 2u);
  json verdict = json::parse(statuses[1].body);
  EXPECT_EQ(verdict["state"], "failure");
  EXPECT_EQ(verdict["target_url"],
            "https://kernelwatch.example.com/#/run/" + std::to_string(answer["run_id"].get<int>()));
  EXPECT_NE(verdict["description"].get<std::string>().find("case(s) regressed; worst attention.fwd/case"),
            std::string::npos)
      << verdict["description"];
  EXPECT_LE(verdict["description"].get<std::string>().size(), 140u);
  (void)base;
}

TEST_F(NotificationTest, AcknowledgementTurnsTheStatusGreen) {
  configure({{"github_repo", "acme/kernels"}});
  agent().post("/api/v1/runs", make_report({}));
  ReportSpec slower;
  slower.slowdown = 1.25;
  slower.seed = 9;
  json run = agent().post("/api/v1/runs", make_report(slower)).json();
  ASSERT_EQ(run["verdict"], "regression");
  ci().post("/api/v1/runs/" + std::to_string(run["run_id"].get<int>()) + "/acknowledge",
            {{"reason", "trade for memory"}});
  std::string path = "/repos/acme/kernels/statuses/" + make_commit(9);
  std::vector<Request> statuses = github_.wait_for(2, [&](const Request& r) { return r.path == path; });
  ASSERT_EQ(statuses.size(), 2u);
  json green = json::parse(statuses[1].body);
  EXPECT_EQ(green["state"], "success");
  EXPECT_EQ(green["description"], "regression acknowledged by ci: trade for memory");
}

// GitLab's async gate. The project named by its path, URL-encoded; the
// token in PRIVATE-TOKEN; GitLab's states (failed, not failure).
TEST_F(NotificationTest, GitlabCommitStatusPendingThenFailedOnRegressionThenSuccessOnAcknowledgement) {
  configure({{"gitlab_project", "acme/gpu/kernels"}});
  agent().post("/api/v1/runs", make_report({}));
  std::string sha = make_commit(78);
  std::int64_t job =
      ci().post("/api/v1/jobs", {{"project", "demo"}, {"commit", sha}, {"branch", "mr-4"}}).json()["id"];
  // The raw target: the recorder's `path` is decoded.
  const std::string path = "/api/v4/projects/acme%2Fgpu%2Fkernels/statuses/" + sha;
  auto on_sha = [&](const Request& r) { return r.target == path; };
  std::vector<Request> pending = gitlab_.wait_for(1, on_sha);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].method, "POST");
  EXPECT_EQ(pending[0].headers["private-token"], "glpat-test-token");
  EXPECT_EQ(json::parse(pending[0].body)["state"], "pending");
  EXPECT_EQ(json::parse(pending[0].body)["name"], "kernelwatch");

  agent().post("/api/v1/agents/claim", {{"agent", "gpu-host-1"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}});
  ReportSpec slower;
  slower.commit = sha;
  slower.slowdown = 1.25;
  slower.seed = 6;
  json answer = agent().post("/api/v1/jobs/" + std::to_string(job) + "/report", make_report(slower)).json();
  ASSERT_EQ(answer["verdict"], "regression");
  std::vector<Request> statuses = gitlab_.wait_for(2, on_sha);
  ASSERT_EQ(statuses.size(), 2u);
  json failed = json::parse(statuses[1].body);
  EXPECT_EQ(failed["state"], "failed");
  EXPECT_EQ(failed["target_url"],
            "https://kernelwatch.example.com/#/run/" + std::to_string(answer["run_id"].get<int>()));

  ci().post("/api/v1/runs/" + std::to_string(answer["run_id"].get<int>()) + "/acknowledge",
            {{"reason", "trade for memory"}});
  statuses = gitlab_.wait_for(3, on_sha);
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(json::parse(statuses[2].body)["state"], "success");
  // Nothing went to GitHub: the project names no repository there.
  EXPECT_TRUE(github_
                  .wait_for(
                      1, [](const Request&) { return true; }, std::chrono::seconds(1))
                  .empty());
}

TEST_F(NotificationTest, AGitlabProjectMustBeAnIdOrAPath) {
  auto response =
      client(admin_token_)
          .request("PUT", "/api/v1/projects/demo/settings", json{{"gitlab_project", "acme"}}.dump());
  EXPECT_EQ(response.status, 422) << response.body;
  EXPECT_NE(response.body.find("numeric id"), std::string::npos) << response.body;
  configure({{"gitlab_project", "4242"}});
}

// A profile explains a verdict: its end is a webhook event, and a profile
// that failed is no error status on the commit.
TEST_F(NotificationTest, AProfileEndsInAWebhookAndNeverInACommitStatus) {
  configure({{"github_repo", "acme/kernels"}, {"webhook_url", github_.url() + "/hook"}});
  agent().post("/api/v1/runs", make_report({}));
  ASSERT_EQ(agent()
                .post("/api/v1/agents/claim",
                      {{"agent", "profiler"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}, {"can_profile", true}})
                .status,
            204);
  ReportSpec slower;
  slower.commit = make_commit(2);
  slower.slowdown = 1.25;
  json answer = agent().post("/api/v1/runs", make_report(slower)).json();
  ASSERT_EQ(answer["verdict"], "regression");
  auto claimed =
      agent().post("/api/v1/agents/claim",
                   {{"agent", "profiler"}, {"gpus", {"NVIDIA H100 80GB HBM3"}}, {"can_profile", true}});
  ASSERT_EQ(claimed.status, 200) << claimed.body;
  ASSERT_EQ(claimed.json()["kind"], "profile");
  ASSERT_EQ(agent()
                .post("/api/v1/jobs/" + claimed.json()["id"].dump() + "/fail",
                      {{"agent", "profiler"}, {"reason", "ncu: ERR_NVGPUCTRPERM"}})
                .status,
            200);
  auto profile_event = [](const Request& r) {
    return r.path == "/hook" && json::parse(r.body).value("event", "") == "profile";
  };
  std::vector<Request> events = github_.wait_for(1, profile_event);
  ASSERT_EQ(events.size(), 1u);
  json event = json::parse(events[0].body);
  EXPECT_EQ(event["state"], "failed");
  EXPECT_EQ(event["reason"], "worst_regression");
  EXPECT_EQ(event["run_id"], answer["run_id"]);
  EXPECT_NE(event["error"].get<std::string>().find("ERR_NVGPUCTRPERM"), std::string::npos);
  EXPECT_EQ(events[0].headers.at("x-kernelwatch-event"), "profile");
  // Every notification queued so far has been sent: the statuses are all there.
  wait_until(
      [&] {
        return sql("SELECT count(*) FROM notifications WHERE delivered_at IS NULL AND failed_at IS NULL")
                   [0][0]
                       .as<int>() == 0;
      },
      "the outbox to be sent");
  const std::vector<Request> statuses = github_.wait_for(
      0, [&](const Request& r) { return r.path == "/repos/acme/kernels/statuses/" + make_commit(2); });
  ASSERT_FALSE(statuses.empty());
  for (const Request& status : statuses) {
    EXPECT_EQ(json::parse(status.body)["state"], "failure") << "the verdict's status alone";
  }
}

class WebhookRetryTest : public NotificationTest {};

TEST_F(WebhookRetryTest, WebhookIsSignedAndRetriedUntilAccepted) {
  GithubApiTestDouble receiver(2);  // fails twice, then accepts
  configure({{"webhook_url", receiver.url() + "/hooks/kernelwatch"}});
  json run = agent().post("/api/v1/runs", make_report({})).json();
  std::vector<Request> deliveries =
      receiver.wait_for(3, [](const Request& r) { return r.path == "/hooks/kernelwatch"; });
  ASSERT_EQ(deliveries.size(), 3u) << "two failures, then the retry that succeeds";
  const Request& last = deliveries.back();
  EXPECT_EQ(last.headers.at("x-kernelwatch-signature-256"),
            "sha256=" + common::hmac_sha256_hex("s3cret", last.body));
  EXPECT_EQ(last.headers.at("x-kernelwatch-event"), "verdict");
  json body = json::parse(last.body);
  EXPECT_EQ(body["verdict"], "pass");
  EXPECT_EQ(body["run_id"], run["run_id"]);
  EXPECT_EQ(body["project"], "demo");
  // The outbox row shows the attempts and the delivery.
  wait_until([&] { return sql("SELECT delivered_at IS NOT NULL FROM notifications")[0][0].as<bool>(); },
             "the delivery to be recorded");
  pqxx::row row = sql("SELECT attempts, delivered_at IS NOT NULL, last_error IS NULL FROM notifications")[0];
  EXPECT_EQ(row[0].as<int>(), 3);
  EXPECT_TRUE(row[1].as<bool>());
}

TEST_F(NotificationTest, IngestDoesNotWaitForAReceiverThatNeverAnswers) {
  // A listening socket that never accepts: connections complete in the
  // backlog, requests are never answered.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  configure({{"webhook_url", "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/hook"}});
  for (int i = 0; i < 3; ++i) {
    ReportSpec spec;
    spec.seed = 100 + static_cast<std::uint64_t>(i);
    auto started = std::chrono::steady_clock::now();
    auto response = agent().post("/api/v1/runs", make_report(spec));
    auto elapsed = std::chrono::steady_clock::now() - started;
    EXPECT_EQ(response.status, 201);
    EXPECT_LT(elapsed, std::chrono::seconds(2)) << "ingest waited on the webhook";
  }
  EXPECT_EQ(sql("SELECT count(*) FROM notifications WHERE delivered_at IS NULL")[0][0].as<int>(), 3);
  close(fd);
}

// A webhook target that accepts connections and never answers (nor closes).
class HangingTarget {
 public:
  HangingTarget() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      for (;;) {
        boost::asio::ip::tcp::socket socket(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec) return;
        std::lock_guard lock(mutex_);
        held_.push_back(std::move(socket));
      }
    });
  }
  ~HangingTarget() {
    // Wakes the blocking accept, then ends it.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    boost::system::error_code ec;
    acceptor_.close(ec);
  }
  std::string origin() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  std::size_t connections() {
    std::lock_guard lock(mutex_);
    return held_.size();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mutex_;
  std::vector<boost::asio::ip::tcp::socket> held_;
};

class NotificationTargetsTest : public NotificationTest {
 protected:
  ServerOptions server_options() override {
    ServerOptions options = NotificationTest::server_options();
    options.notifications.timeouts.connect = std::chrono::seconds(1);
    options.notifications.timeouts.total = std::chrono::seconds(2);
    options.notifications.target_policy.pause_after_failures = 2;
    options.lease_seconds = 4;  // the stored metrics are refreshed each second
    return options;
  }
  HangingTarget hanging_;
};

// A target that hangs holds one delivery worker for at most its timeout:
// another project's webhook, queued after it, arrives meanwhile. Failing on
// and on, the target is paused, and the project page and /metrics say so.
TEST_F(NotificationTargetsTest, AHangingWebhookDelaysNoOtherTargetAndIsPausedAfterRepeatedFailures) {
  create_project("other");
  configure({{"webhook_url", hanging_.origin() + "/hook"}});
  ASSERT_EQ(client(admin_token_)
                .request("PUT", "/api/v1/projects/other/settings",
                         json{{"webhook_url", github_.url() + "/other-hook"}}.dump())
                .status,
            200);
  ReportSpec demo_run;
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(demo_run)).status, 201);
  for (int i = 0; i < 50 && hanging_.connections() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(hanging_.connections(), 1u) << "the hanging target has its attempt under way";

  ReportSpec other_run;
  other_run.project = "other";
  other_run.seed = 2;
  const auto posted = std::chrono::steady_clock::now();
  ASSERT_EQ(agent().post("/api/v1/runs", make_report(other_run)).status, 201);
  auto delivered = github_.wait_for(
      1, [](const Request& r) { return r.path == "/other-hook"; }, std::chrono::seconds(10));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count();
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_LT(waited, 2.0) << "delayed by the hanging target";
  EXPECT_EQ(json::parse(delivered[0].body)["project"], "other");

  // Two attempts time out (2 s each, 1 s apart): the target is paused.
  json targets;
  for (int i = 0; i < 150; ++i) {
    targets = client(admin_token_).get("/api/v1/projects/demo").json()["notification_targets"];
    if (!targets.empty() && targets[0]["state"] == "paused") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(targets.size(), 1u) << targets.dump();
  EXPECT_EQ(targets[0]["target"], hanging_.origin());
  EXPECT_EQ(targets[0]["state"], "paused") << targets.dump();
  EXPECT_EQ(targets[0]["consecutive_failures"], 2);
  EXPECT_EQ(targets[0]["pending"], 1);
  EXPECT_NE(targets[0]["last_error"].get<std::string>().find("timed out"), std::string::npos)
      << targets.dump();
  EXPECT_EQ(hanging_.connections(), 2u) << "no attempt while paused";
  std::string metrics;
  const std::string paused_line = "kw_notification_target_paused{target=\"" + hanging_.origin() + "\"} 1";
  for (int i = 0; i < 50 && metrics.find(paused_line) == std::string::npos; ++i) {
    metrics = client().get("/metrics").body;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(metrics.find(paused_line), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kw_notifications_pending 1"), std::string::npos) << metrics;
}

}  // namespace
}  // namespace kw::server::testing
