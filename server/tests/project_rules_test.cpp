// The rules of projects, their settings and API tokens (SettingsService,
// TokenService) over an in-memory stand-in of their store: who may make,
// read and change what, and that a refused change writes nothing.
#include <gtest/gtest.h>

#include <functional>

#include "errors.hpp"
#include "in_memory_project_store.hpp"
#include "service/settings_service.hpp"
#include "service/token_service.hpp"

namespace kw::server::testing {
namespace {

using nlohmann::json;

Caller caller(const std::string& name, Scope scope, std::optional<std::vector<std::string>> projects) {
  return Caller{7, name, scope, std::move(projects)};
}

// The code of the HttpError `action` throws ("" when it throws none).
std::string error_of(const std::function<void()>& action, std::string* message = nullptr) {
  try {
    action();
  } catch (const HttpError& error) {
    if (message) *message = error.what();
    return error.code();
  }
  return "";
}

class ProjectRulesTest : public ::testing::Test {
 protected:
  ProjectRulesTest() { settings_.create_project(admin_, "alpha", "main"); }

  InMemoryProjectStore store_;
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
  EXPECT_TRUE(store_.committed.empty());

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
  EXPECT_EQ(store_.committed, std::vector<std::string>{"alpha"}) << "the project's reads are told";
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

}  // namespace
}  // namespace kw::server::testing
