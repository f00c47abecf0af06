// The rules of projects, their settings and API tokens (SettingsService,
// TokenService) over an in-memory stand-in of their store: who may make,
// read and change what, and that a refused change writes nothing; and their
// routes over the same (ProjectRoutesTest).
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/router.hpp"
#include "in_memory_store.hpp"
#include "routed_request.hpp"
#include "service/settings_service.hpp"
#include "service/token_service.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

Caller caller(const std::string& name, Scope scope, std::optional<std::vector<std::string>> projects) {
  return Caller{7, name, scope, std::move(projects)};
}

class ProjectRulesTest : public ::testing::Test {
 protected:
  ProjectRulesTest() { settings_.create_project(admin_, "alpha", "main"); }

  InMemoryStore store_;
  NotifierOptions notifications_;
  SettingsService settings_{store_, notifications_};
  TokenService tokens_{store_};
  const Caller admin_ = caller("root", Scope::admin, std::nullopt);
  const Caller alpha_admin_ = caller("alpha-admin", Scope::admin, std::vector<std::string>{"alpha"});
};

TEST_F(ProjectRulesTest, OnlyAnUnscopedAdminMakesProjectsAndANameIsMadeOnce) {
  std::string message;
  EXPECT_EQ(error_of([&] { settings_.create_project(alpha_admin_, "beta", "main"); }, &message),
            "project_denied");
  EXPECT_NE(message.find("only an unscoped admin makes projects"), std::string::npos) << message;
  EXPECT_FALSE(store_.settings("beta"));

  json made = settings_.create_project(admin_, "beta", "trunk");
  EXPECT_EQ(made["name"], "beta");
  EXPECT_EQ(made["default_branch"], "trunk");
  EXPECT_EQ(made["min_threshold"], common::DetectionSettings{}.min_threshold);
  EXPECT_EQ(error_of([&] { settings_.create_project(admin_, "beta", "main"); }), "project_exists");
}

// A project the token does not name is refused before it is looked up, so
// no answer says whether it exists.
TEST_F(ProjectRulesTest, AProjectOutsideTheTokenIsRefusedWhetherOrNotItExists) {
  const Caller beta_reader = caller("beta-reader", Scope::read, std::vector<std::string>{"beta"});
  EXPECT_EQ(error_of([&] { settings_.project(&beta_reader, "alpha"); }), "project_denied");
  EXPECT_EQ(error_of([&] { settings_.project(&beta_reader, "gamma"); }), "project_denied");
  std::string message;
  EXPECT_EQ(error_of([&] { settings_.project(&admin_, "gamma"); }, &message), "no_such_project");
  EXPECT_EQ(message, "no project \"gamma\"");
  // An open read (no token) reads any project.
  EXPECT_EQ(settings_.project(nullptr, "alpha")["name"], "alpha");
}

TEST_F(ProjectRulesTest, OnlyAdminsSeeHowNotificationsFare) {
  settings_.update(admin_, "alpha", {{"webhook_url", "https://hooks.example.com/kw"}});
  json seen_by_admin = settings_.project(&admin_, "alpha");
  ASSERT_EQ(seen_by_admin["notification_targets"].size(), 1u) << seen_by_admin.dump();
  EXPECT_EQ(seen_by_admin["notification_targets"][0]["target"], "https://hooks.example.com");
  const Caller reader = caller("reader", Scope::read, std::nullopt);
  EXPECT_FALSE(settings_.project(&reader, "alpha").contains("notification_targets"));
}

// A request with one wrong field is refused whole, naming the field: the
// fields before it are not written either.
TEST_F(ProjectRulesTest, SettingsAreCheckedWholeAndARefusedChangeWritesNothing) {
  const json changes = {{"min_threshold", 0.05}, {"run_alpha", 0.5}};
  std::string message;
  EXPECT_EQ(error_of([&] { settings_.update(admin_, "alpha", changes); }, &message), "out_of_range");
  EXPECT_NE(message.find("run_alpha: must be a number above 0 and at most"), std::string::npos) << message;
  EXPECT_EQ(store_.settings("alpha")->min_threshold, common::DetectionSettings{}.min_threshold);
  EXPECT_TRUE(store_.committed_projects().empty());

  EXPECT_EQ(error_of([&] { settings_.update(admin_, "alpha", {{"thresholds", 0.1}}); }), "unknown_field");
  EXPECT_EQ(error_of([&] {
              settings_.update(admin_, "alpha", {{"github_repo", "no-slash"}});
            }),
            "invalid_value");
  EXPECT_EQ(error_of([&] {
              settings_.update(admin_, "gamma", {{"min_threshold", 0.02}});
            }),
            "no_such_project");

  json updated = settings_.update(
      admin_, "alpha",
      {{"min_threshold", 0.02}, {"case_thresholds", {{"gemm/f16", 0.05}}}, {"run_alpha", 0.001}});
  EXPECT_EQ(updated["min_threshold"], 0.02);
  EXPECT_EQ(updated["case_thresholds"]["gemm/f16"], 0.05);
  EXPECT_EQ(store_.settings("alpha")->min_threshold_for("gemm/f16"), 0.05);
  EXPECT_EQ(store_.committed_projects(), std::vector<std::string>{"alpha"}) << "the project's reads are told";
  // null puts a case back on the project's threshold, and clears a target.
  updated = settings_.update(admin_, "alpha",
                             {{"case_thresholds", {{"gemm/f16", nullptr}}}, {"github_repo", nullptr}});
  EXPECT_TRUE(updated["case_thresholds"].empty());
  EXPECT_TRUE(updated["github_repo"].is_null());
}

TEST_F(ProjectRulesTest, AWebhookMustReachAPublicAddressUnlessTheServerAllowsPrivateOnes) {
  for (const char* url : {"http://127.0.0.1:9000/hook", "http://10.1.2.3/hook", "http://[::1]/hook"}) {
    std::string message;
    EXPECT_EQ(error_of(
                  [&] {
                    settings_.update(admin_, "alpha", {{"webhook_url", url}});
                  },
                  &message),
              "private_webhook")
        << url;
    EXPECT_NE(message.find("--allow-private-webhooks"), std::string::npos) << message;
  }
  EXPECT_TRUE(store_.settings("alpha")->webhook_url.empty());
  notifications_.allow_private_webhooks = true;
  EXPECT_EQ(settings_.update(admin_, "alpha", {{"webhook_url", "http://10.1.2.3/hook"}})["webhook_url"],
            "http://10.1.2.3/hook");
  // Clearing it is never refused.
  notifications_.allow_private_webhooks = false;
  EXPECT_TRUE(settings_.update(admin_, "alpha", {{"webhook_url", nullptr}})["webhook_url"].is_null());
}

TEST_F(ProjectRulesTest, AProjectScopedAdminChangesOnlyItsProjects) {
  settings_.create_project(admin_, "beta", "main");
  EXPECT_EQ(error_of([&] {
              settings_.update(alpha_admin_, "beta", {{"min_threshold", 0.02}});
            }),
            "project_denied");
  EXPECT_EQ(settings_.update(alpha_admin_, "alpha", {{"min_threshold", 0.03}})["min_threshold"], 0.03);
}

// A project-scoped admin makes, lists and revokes only tokens scoped to its
// own projects; another project's token is answered as if there were none.
TEST_F(ProjectRulesTest, AProjectScopedAdminManagesOnlyItsProjectsTokens) {
  json own = tokens_.create(alpha_admin_, "alpha-ci", Scope::ci, std::nullopt);
  EXPECT_EQ(own["projects"], json({"alpha"})) << "no wider than the admin's own";
  EXPECT_EQ(own["token"].get<std::string>().rfind("kw_", 0), 0u);
  EXPECT_EQ(
      error_of([&] { tokens_.create(alpha_admin_, "beta-ci", Scope::ci, std::vector<std::string>{"beta"}); }),
      "project_denied");
  json wide = tokens_.create(admin_, "fleet", Scope::agent, std::nullopt);
  json beta = tokens_.create(admin_, "beta-agent", Scope::agent, std::vector<std::string>{"beta"});
  EXPECT_TRUE(store_.settings("beta")) << "a token scoped to a project makes it";

  json listed = tokens_.list(alpha_admin_);
  ASSERT_EQ(listed.size(), 1u) << listed.dump();
  EXPECT_EQ(listed[0]["name"], "alpha-ci");
  EXPECT_EQ(tokens_.list(admin_).size(), 3u);

  for (const json& other : {wide, beta}) {
    std::string message;
    EXPECT_EQ(error_of([&] { tokens_.revoke(alpha_admin_, other["id"].get<std::int64_t>()); }, &message),
              "no_such_token");
    EXPECT_EQ(message, "no active token " + other["id"].dump());
  }
  tokens_.revoke(alpha_admin_, own["id"].get<std::int64_t>());
  EXPECT_FALSE(tokens_.list(admin_)[0]["revoked_at"].is_null());
  EXPECT_EQ(error_of([&] { tokens_.revoke(alpha_admin_, own["id"].get<std::int64_t>()); }), "no_such_token");
  EXPECT_EQ(error_of([&] { tokens_.revoke(admin_, 99); }), "no_such_token");
}

// The project and token routes through the router over the same services:
// what the handlers check of a request before the service sees it, with a
// TEST DOUBLE for token lookup.
class ProjectRoutesTest : public ProjectRulesTest {
 protected:
  ProjectRoutesTest() {
    add_project_routes(router_, settings_);
    add_token_routes(router_, tokens_);
  }

  using Answer = RoutedAnswer;
  Answer call(const std::string& method, const std::string& path, const std::string& body = {},
              const std::string& token = "root") {
    return routed(router_, method, path, token, body);
  }
  Answer put_settings(const json& changes) {
    return call("PUT", "/api/v1/projects/alpha/settings", changes.dump());
  }

  Metrics metrics_;
  Router router_{[this](const std::string& token) -> std::optional<Caller> {
                   if (token == "root") return admin_;
                   if (token == "alpha-admin") return alpha_admin_;
                   if (token == "ci") return caller("ci", Scope::ci, std::nullopt);
                   return std::nullopt;
                 },
                 metrics_, false};
};

TEST_F(ProjectRoutesTest, AProjectIsMadeByAnAdminWithAGoodName) {
  EXPECT_EQ(call("POST", "/api/v1/projects", R"({"name": "beta"})", "ci").body["error"], "scope_denied");
  EXPECT_EQ(call("POST", "/api/v1/projects", R"({"name": "a b"})").body["field"], "name");
  EXPECT_EQ(call("POST", "/api/v1/projects", R"({"default_branch": "trunk"})").body["message"],
            "name: is required");
  const Answer made = call("POST", "/api/v1/projects", R"({"name": "beta", "default_branch": "trunk"})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.body["default_branch"], "trunk");
  EXPECT_EQ(call("POST", "/api/v1/projects", R"({"name": "beta"})").status, 409);
  EXPECT_EQ(call("GET", "/api/v1/projects/beta", "", "").body["name"], "beta") << "reads are open here";
}

TEST_F(ProjectRoutesTest, ATokenRequestIsCheckedBeforeATokenIsMade) {
  EXPECT_EQ(call("POST", "/api/v1/tokens", R"({"name": "x", "scope": "admin"})", "ci").status, 403);
  EXPECT_EQ(call("POST", "/api/v1/tokens", R"({"name": "x", "scope": "root"})").body["field"], "scope");
  EXPECT_EQ(call("POST", "/api/v1/tokens", R"({"name": "x", "scope": "read", "projects": []})").status, 422);
  EXPECT_TRUE(store_.tokens().empty());
  const Answer made =
      call("POST", "/api/v1/tokens", R"({"name": "host", "scope": "agent", "projects": ["alpha"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_TRUE(made.body.contains("token"));
  const Answer listed = call("GET", "/api/v1/tokens");
  ASSERT_EQ(listed.body.size(), 1u);
  EXPECT_FALSE(listed.body[0].contains("token")) << "a secret is shown once";
  const std::string revoke = "/api/v1/tokens/" + made.body["id"].dump();
  EXPECT_EQ(call("DELETE", revoke).status, 200);
  EXPECT_EQ(call("DELETE", revoke).body["error"], "no_such_token");
  EXPECT_EQ(call("DELETE", "/api/v1/tokens/x").status, 404);
}

TEST_F(ProjectRoutesTest, HugeSettingsValuesAre422NamingTheField) {
  for (const char* field : {"gitlab_project", "github_repo", "webhook_url", "default_branch"}) {
    for (std::size_t length : {40000u, 60000u}) {
      std::string value(length, 'x');
      if (std::string(field) == "webhook_url") value = "http://" + value;
      if (std::string(field) == "gitlab_project") value = std::string(length / 2, 'g') + "/" + value;
      const Answer answer = put_settings(json{{field, value}});
      EXPECT_EQ(answer.status, 422) << field << " of " << length << ": " << answer.body.dump().substr(0, 200);
      EXPECT_EQ(answer.body["field"], field);
    }
  }
  EXPECT_EQ(put_settings(json{{"case_thresholds", {{std::string(300, 'c'), 0.02}}}}).status, 422);
  EXPECT_EQ(call("GET", "/api/v1/projects/alpha").body["gitlab_project"], nullptr) << "nothing was stored";
  EXPECT_TRUE(store_.committed_projects().empty());
}

TEST_F(ProjectRoutesTest, SettingsAreValidatedAsWhatTheyBecome) {
  struct Case {
    json settings;
    int status;
  };
  const std::vector<Case> cases = {
      {{{"webhook_url", "http://127.0.0.1:9/hook\r\nX-Injected: yes"}}, 422},
      {{{"webhook_url", "http://127.0.0.1:9/a b"}}, 422},
      {{{"webhook_url", "ftp://example.com/"}}, 422},
      {{{"webhook_url", "http:///no-host"}}, 422},
      {{{"webhook_url", "http://user:pw@example.com/"}}, 422},
      {{{"webhook_url", "http://example.com:99999/"}}, 422},
      {{{"webhook_url", "https://hooks.example.com:8443/kernelwatch?team=gpu"}}, 200},
      {{{"webhook_url", "http://[::1]:8080/hook"}}, 422},  // private: see AWebhookMustReachAPublicAddress...
      {{{"github_repo", "../.."}}, 422},
      {{{"github_repo", "owner/name/extra"}}, 422},
      {{{"github_repo", "-owner/name"}}, 422},
      {{{"github_repo", "owner/.."}}, 422},
      {{{"github_repo", "NVIDIA/cutlass"}}, 200},
      {{{"gitlab_project", "group/../name"}}, 422},
      {{{"gitlab_project", "name"}}, 422},
      {{{"gitlab_project", "group/name.git"}}, 422},
      {{{"gitlab_project", "group/sub-group/my.project"}}, 200},
      {{{"gitlab_project", "12345"}}, 200},
      {{{"default_branch", std::string(201, 'b')}}, 422},
      {{{"default_branch", "trunk\n"}}, 422},
      {{{"default_branch", "release/2.0"}}, 200},
      {{{"webhook_url", "http://example.com/" + std::string(3000, 'p')}}, 422},
  };
  for (const Case& c : cases) {
    const Answer answer = put_settings(c.settings);
    EXPECT_EQ(answer.status, c.status) << c.settings.dump().substr(0, 120) << ": " << answer.body;
  }
  // A request with one bad value changes nothing, not even its good values.
  EXPECT_EQ(put_settings({{"min_threshold", 0.07}, {"github_repo", "../.."}}).status, 422);
  EXPECT_NE(call("GET", "/api/v1/projects/alpha").body["min_threshold"], 0.07);
}

}  // namespace
}  // namespace kw::server::testing
