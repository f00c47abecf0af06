// The rules a part of a report sent in parts is held to (check_part), on the
// facts the store reads under the upload's lock, without a database: whose
// upload it is, its number of parts, its state, the size of one report and
// the quotas of open uploads. upload_test.cpp runs them through PostgreSQL
// and HTTP, with parts racing each other.
#include <gtest/gtest.h>

#include "errors.hpp"
#include "service/upload_service.hpp"

namespace kw::server::testing {
namespace {

constexpr std::int64_t kToken = 7;
constexpr int kParts = 4;

// A part of an open upload of the token's, nothing else open.
PartFacts facts() {
  PartFacts f;
  f.token_id = kToken;
  f.parts = kParts;
  f.decoded_bytes = 1000;
  f.stored_bytes = 300;
  return f;
}

UploadQuota quota() {
  UploadQuota q;
  q.uploads_per_token = 2;
  q.bytes_per_token = 10'000;
  q.uploads_per_project = 3;
  q.bytes_per_project = 20'000;
  return q;
}

// The status and code check_part refuses the part with, and its message.
struct Refusal {
  int status = 0;
  std::string code, message;
};
Refusal refusal(const PartFacts& f, std::size_t report_limit = 1 << 20) {
  try {
    check_part(f, kToken, "u-1", kParts, report_limit, quota());
  } catch (const HttpError& error) {
    return {error.status(), error.code(), error.what()};
  }
  return {};
}

TEST(UploadRulesTest, APartWithinEveryLimitIsTaken) {
  EXPECT_EQ(refusal(facts()).status, 0);
  PartFacts first = facts();
  first.created = true;
  first.of_token = {1, 9'000};
  first.of_project = {2, 19'000};
  EXPECT_EQ(refusal(first).status, 0) << "one more upload, up to each quota";
}

TEST(UploadRulesTest, AnotherTokensUploadIsAnsweredAsNone) {
  PartFacts theirs = facts();
  theirs.token_id = 8;
  const Refusal r = refusal(theirs);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.code, "no_such_upload");
  EXPECT_EQ(r.message, "no upload u-1 of this token");
}

TEST(UploadRulesTest, AnUploadKeepsItsNumberOfPartsAndItsPartsOnceCompleting) {
  PartFacts other_count = facts();
  other_count.parts = 5;
  Refusal r = refusal(other_count);
  EXPECT_EQ(r.code, "upload_mismatch");
  EXPECT_EQ(r.message, "upload u-1 was begun with 5 parts, not 4");
  PartFacts completed = facts();
  completed.run_id = 42;
  r = refusal(completed);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.message, "upload u-1 is already stored as run 42");
  PartFacts completing = facts();
  completing.completing = true;
  EXPECT_EQ(refusal(completing).code, "upload_completing");
}

TEST(UploadRulesTest, ItsPartsTogetherAreHeldToTheLimitOfOneReport) {
  PartFacts big = facts();
  big.decoded_bytes = 2001;
  const Refusal r = refusal(big, 2000);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.message,
            "upload u-1: its parts come to 2001 bytes decoded, more than the limit of 2000 for one report");
  big.decoded_bytes = 2000;
  EXPECT_EQ(refusal(big, 2000).status, 0);
}

// Counts hold back a new upload only; bytes hold back any part that would
// take the open uploads past their quota.
TEST(UploadRulesTest, OpenUploadsAreHeldToTheTokensAndTheProjectsQuotas) {
  PartFacts fresh = facts();
  fresh.created = true;
  fresh.of_token = {2, 0};
  Refusal r = refusal(fresh);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.code, "too_many_uploads");
  EXPECT_NE(r.message.find("this token has 2 uploads not completed"), std::string::npos) << r.message;
  PartFacts more_of_one = fresh;
  more_of_one.created = false;
  EXPECT_EQ(refusal(more_of_one).status, 0) << "an upload begun goes on";

  PartFacts full = facts();
  full.of_token = {1, 9'701};
  r = refusal(full);
  EXPECT_EQ(r.status, 507);
  EXPECT_EQ(r.message,
            "this token's uploads not completed would hold 10001 bytes, more than its quota of 10000");

  PartFacts project_full = facts();
  project_full.created = true;
  project_full.of_project = {3, 0};
  r = refusal(project_full);
  EXPECT_EQ(r.status, 429);
  EXPECT_NE(r.message.find("this project has 3 uploads"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace kw::server::testing
