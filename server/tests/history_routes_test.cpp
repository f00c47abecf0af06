// The history routes (GET /api/v1/projects/...) over a HistoryReads TEST
// DOUBLE: what the handlers decide themselves (who may read, which
// parameters are good, what the read cache keeps) needs no database. The
// same routes over PostgreSQL are covered by the api, access and read-cache
// tests.
#include <gtest/gtest.h>

#include <map>

#include "errors.hpp"
#include "http/handlers/handlers.hpp"
#include "http/router.hpp"

namespace kw::server {
namespace {

using nlohmann::json;

// Answers from a map of projects; counts the reads and keeps the last
// arguments, so a test sees whether and how the store was asked.
class HistoryReadsStandIn final : public HistoryReads {
 public:
  std::map<std::string, std::string> default_branch = {{"alpha", "main"}, {"beta", "trunk"}};
  int reads = 0;
  json last;

  std::string projects(const std::optional<std::vector<std::string>>& only) override {
    note({{"read", "projects"}, {"only", only ? json(*only) : json()}});
    return "[]";
  }
  std::optional<std::string> overview(const std::string& project, const std::string& branch,
                                      const CaseFilter& filter, const Page& page) override {
    note(
        {{"read", "overview"},
         {"project", project},
         {"branch", branch.empty() && default_branch.contains(project) ? default_branch.at(project) : branch},
         {"gpu", filter.gpu_model},
         {"case_like", filter.name_like},
         {"statuses", filter.statuses},
         {"page", page.number},
         {"per_page", page.per_page}});
    return answer(project);
  }
  std::optional<std::string> cases(const std::string& project) override {
    note({{"read", "cases"}, {"project", project}});
    return answer(project);
  }
  std::optional<std::string> audit(const std::string& project) override {
    note({{"read", "audit"}, {"project", project}});
    return answer(project);
  }
  std::optional<std::string> runs(const std::string& project, const std::string& branch,
                                  const CaseFilter& filter, const Page& page,
                                  bool regressions_only) override {
    note({{"read", "runs"},
          {"project", project},
          {"branch", branch},
          {"gpu", filter.gpu_model},
          {"case_like", filter.name_like},
          {"limit", page.per_page},
          {"page", page.number},
          {"regressions", regressions_only}});
    return answer(project);
  }
  std::optional<std::string> branches(const std::string& project) override {
    note({{"read", "branches"}, {"project", project}});
    return answer(project);
  }
  std::optional<std::string> series(const std::string& project, const std::string& case_name,
                                    const std::string& gpu, const std::string& branch, int limit) override {
    note({{"read", "series"},
          {"project", project},
          {"case", case_name},
          {"gpu", gpu},
          {"branch", branch},
          {"limit", limit}});
    return answer(project);
  }

 private:
  void note(json call) {
    ++reads;
    last = std::move(call);
  }
  std::optional<std::string> answer(const std::string& project) const {
    if (!default_branch.contains(project)) return std::nullopt;
    return json{{"answer", reads}}.dump();
  }
};

class HistoryRoutesTest : public ::testing::Test {
 protected:
  HistoryRoutesTest()
      : router_(
            [](const std::string& token) -> std::optional<Caller> {
              if (token == "alpha-only")
                return Caller{1, "alpha-only", Scope::read, std::vector<std::string>{"alpha"}};
              if (token == "everything") return Caller{2, "everything", Scope::read, std::nullopt};
              return std::nullopt;
            },
            metrics_, true) {
    // As kw-server's change feed does once it listens.
    cache_.set_enabled(true);
    add_history_routes(router_, reads_, cache_);
  }

  // GET `target` with `token`: the status and the JSON body.
  std::pair<int, json> get(const std::string& target, const std::string& token = "everything") {
    Request request;
    request.method = "GET";
    request.target = target;
    const auto question = target.find('?');
    request.path = target.substr(0, question);
    if (question != std::string::npos) {
      std::string query = target.substr(question + 1);
      for (std::size_t start = 0; start <= query.size();) {
        std::size_t end = query.find('&', start);
        if (end == std::string::npos) end = query.size();
        const std::string pair = query.substr(start, end - start);
        const auto equals = pair.find('=');
        if (!pair.empty())
          request.query[pair.substr(0, equals)] = equals == std::string::npos ? "" : pair.substr(equals + 1);
        start = end + 1;
      }
    }
    if (!token.empty()) request.authorization = "Bearer " + token;
    Response response = router_.handle(request);
    return {response.status, json::parse(response.body)};
  }

  Metrics metrics_;
  HistoryReadsStandIn reads_;
  ReadCache cache_;
  Router router_;
};

TEST_F(HistoryRoutesTest, AProjectOutsideTheTokensScopeIsRefusedBeforeAnyRead) {
  for (const char* target :
       {"/api/v1/projects/beta/overview", "/api/v1/projects/beta/cases", "/api/v1/projects/beta/audit",
        "/api/v1/projects/beta/runs", "/api/v1/projects/beta/regressions", "/api/v1/projects/beta/branches",
        "/api/v1/projects/beta/series?case=x"}) {
    auto [status, body] = get(target, "alpha-only");
    EXPECT_EQ(status, 403) << target;
    EXPECT_EQ(body["error"], "project_denied") << target;
  }
  EXPECT_EQ(reads_.reads, 0);
  EXPECT_EQ(get("/api/v1/projects/alpha/cases", "alpha-only").first, 200);
}

TEST_F(HistoryRoutesTest, ReadsNeedAKnownToken) {
  EXPECT_EQ(get("/api/v1/projects/alpha/cases", "").first, 401);
  auto [status, body] = get("/api/v1/projects/alpha/cases", "forged");
  EXPECT_EQ(status, 401);
  EXPECT_EQ(body["error"], "token_unknown");
  EXPECT_EQ(reads_.reads, 0);
}

TEST_F(HistoryRoutesTest, AScopedTokenListsOnlyItsProjects) {
  get("/api/v1/projects", "alpha-only");
  EXPECT_EQ(reads_.last["only"], json({"alpha"}));
  get("/api/v1/projects", "everything");
  EXPECT_TRUE(reads_.last["only"].is_null());
}

TEST_F(HistoryRoutesTest, AnUnknownProjectIs404ByName) {
  for (const char* target : {"/api/v1/projects/gamma/overview", "/api/v1/projects/gamma/cases",
                             "/api/v1/projects/gamma/audit", "/api/v1/projects/gamma/runs",
                             "/api/v1/projects/gamma/branches", "/api/v1/projects/gamma/series?case=x"}) {
    auto [status, body] = get(target);
    EXPECT_EQ(status, 404) << target;
    EXPECT_EQ(body["error"], "no_such_project") << target;
    EXPECT_EQ(body["message"], "no project \"gamma\"") << target;
  }
}

TEST_F(HistoryRoutesTest, BadParametersAreRefusedNamingTheParameter) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/api/v1/projects/alpha/overview?per_page=0", "per_page"},
      {"/api/v1/projects/alpha/overview?per_page=2001", "per_page"},
      {"/api/v1/projects/alpha/overview?page=x", "page"},
      {"/api/v1/projects/alpha/runs?limit=1001", "limit"},
      {"/api/v1/projects/alpha/regressions?page=0", "page"},
      {"/api/v1/projects/alpha/regressions?status=regression", "status"},
      {"/api/v1/projects/alpha/overview?status=regressed", "status"},
      {"/api/v1/projects/alpha/overview?case=" + std::string(300, 'x'), "case"},
      {"/api/v1/projects/alpha/series", "case"},
      {"/api/v1/projects/alpha/series?case=", "case"},
      {"/api/v1/projects/alpha/series?case=x&limit=10001", "limit"}};
  for (const auto& [target, parameter] : bad) {
    auto [status, body] = get(target);
    EXPECT_EQ(status, 400) << target;
    EXPECT_EQ(body["message"].get<std::string>().rfind(parameter + ":", 0), 0u) << target << ": " << body;
  }
  EXPECT_EQ(reads_.reads, 0);
}

TEST_F(HistoryRoutesTest, ParametersReachTheStore) {
  get("/api/v1/projects/beta/overview?gpu=H100&page=3&per_page=50");
  EXPECT_EQ(reads_.last, json({{"read", "overview"},
                               {"project", "beta"},
                               {"branch", "trunk"},
                               {"gpu", "H100"},
                               {"case_like", ""},
                               {"statuses", ""},
                               {"page", 3},
                               {"per_page", 50}}));
  get("/api/v1/projects/beta/overview?case=fp16&status=regression,no-baseline");
  EXPECT_EQ(reads_.last["case_like"], "%fp16%");
  EXPECT_EQ(reads_.last["statuses"], "regression,no-baseline");
  get("/api/v1/projects/beta/overview?case=attn*/b?_100%");  // this stand-in's query is not encoded
  EXPECT_EQ(reads_.last["case_like"], "attn%/b_\\_100\\%");
  get("/api/v1/projects/alpha/regressions?gpu=A100&case=gemm&page=2");
  EXPECT_EQ(reads_.last["gpu"], "A100");
  EXPECT_EQ(reads_.last["case_like"], "%gemm%");
  EXPECT_EQ(reads_.last["page"], 2);
  get("/api/v1/projects/alpha/regressions?branch=dev&limit=7");
  EXPECT_EQ(reads_.last["regressions"], true);
  EXPECT_EQ(reads_.last["limit"], 7);
  EXPECT_EQ(reads_.last["branch"], "dev");
  get("/api/v1/projects/alpha/runs");
  EXPECT_EQ(reads_.last["regressions"], false);
  EXPECT_EQ(reads_.last["limit"], 100);
}

TEST_F(HistoryRoutesTest, TheOverviewAndSeriesAreReadOnceUntilTheProjectIsWritten) {
  const std::string overview = "/api/v1/projects/alpha/overview?gpu=H100";
  const std::string series = "/api/v1/projects/alpha/series?case=attn/s4096";
  EXPECT_EQ(get(overview).second, get(overview).second);
  EXPECT_EQ(get(series).second, get(series).second);
  EXPECT_EQ(reads_.reads, 2);
  get("/api/v1/projects/alpha/overview?gpu=A100");  // another key
  EXPECT_EQ(reads_.reads, 3);
  cache_.changed("beta");
  get(overview);
  EXPECT_EQ(reads_.reads, 3);
  cache_.changed("alpha");
  get(overview);
  get(series);
  EXPECT_EQ(reads_.reads, 5);
  // Refused callers never see a kept answer.
  EXPECT_EQ(get(overview, "").first, 401);
}

}  // namespace
}  // namespace kw::server
