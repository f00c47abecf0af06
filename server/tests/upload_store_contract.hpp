// What every UploadStore does, whatever keeps it: one suite of typed tests,
// instantiated on PgUploadStore over a test database (run_store_pg_test.cpp,
// labelled db) and on the in-memory stand-in
// (run_store_memory_test.cpp, labelled unit), so that the stand-in the
// rules of uploads are tested on (upload_test.cpp) counts parts, quotas and
// claims as kw-server's store does.
//
// A harness gives the suite its store and what a store does not make:
//   UploadStore& uploads();  RunStore& runs();  (one database)
//   std::int64_t add_project(const std::string& name);
//   Caller token(const std::string& name, Scope scope);
//   void age_upload_claims(double seconds);  (claims begun that much earlier)
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../../tests/support/report_factory.hpp"
#include "errors.hpp"
#include "service/ingest_service.hpp"
#include "service/upload_store.hpp"

namespace kw::server::testing {

template <typename Harness>
class UploadStoreContract : public ::testing::Test {
 protected:
  UploadStoreContract() {
    demo_ = harness_.add_project("demo");
    other_project_ = harness_.add_project("other");
    token_ = harness_.token("agent-1", Scope::agent).token_id;
    other_token_ = harness_.token("agent-2", Scope::agent).token_id;
  }

  template <typename Work>
  auto tx(Work&& work) {
    return in_transaction(harness_.uploads(), std::forward<Work>(work));
  }
  // Part `part` of `parts` with `data` as sent (gzip), decoded to `decoded`
  // bytes; the facts it was judged by.
  PartFacts put(std::int64_t project, std::int64_t token, const std::string& upload, int part, int parts,
                const std::string& data, std::int64_t decoded) {
    PartFacts seen;
    tx([&](UploadTransaction& t) {
      t.put_part(project, token, upload, part, parts, PartBody{data, true, decoded, "sha-" + data},
                 [&](const PartFacts& facts) { seen = facts; });
    });
    return seen;
  }

  // A stored run, as a completed upload makes one.
  std::int64_t stored_run() {
    IngestService ingest(harness_.runs(), 3);
    return ingest.ingest(kw::testing::make_report({}), harness_.token("runs", Scope::agent), std::nullopt)
        .run_id;
  }

  Harness harness_;
  std::int64_t demo_ = 0, other_project_ = 0, token_ = 0, other_token_ = 0;
};

TYPED_TEST_SUITE_P(UploadStoreContract);

TYPED_TEST_P(UploadStoreContract, APartIsJudgedByTheUploadsAndTheOtherOpenUploadsFacts) {
  const PartFacts first = this->put(this->demo_, this->token_, "u1", 1, 3, std::string(10, 'a'), 100);
  EXPECT_TRUE(first.created);
  EXPECT_EQ(first.token_id, this->token_);
  EXPECT_EQ(first.parts, 3);
  EXPECT_FALSE(first.run_id || first.completing);
  EXPECT_EQ(first.decoded_bytes, 100);
  EXPECT_EQ(first.stored_bytes, 10);
  EXPECT_EQ(first.of_token.count, 0);
  // The same part again replaces it; another part adds to it.
  const PartFacts again = this->put(this->demo_, this->token_, "u1", 1, 3, std::string(20, 'b'), 200);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.stored_bytes, 20);
  const PartFacts next = this->put(this->demo_, this->token_, "u1", 0, 3, std::string(5, 'c'), 50);
  EXPECT_EQ(next.decoded_bytes, 250);
  EXPECT_EQ(next.stored_bytes, 25);
  // Other open uploads: of this token anywhere, and of this project by anyone.
  this->put(this->other_project_, this->token_, "u2", 0, 1, std::string(7, 'd'), 70);
  const PartFacts by_other = this->put(this->demo_, this->other_token_, "u3", 0, 2, std::string(3, 'e'), 30);
  EXPECT_EQ(by_other.of_token.count, 0);
  EXPECT_EQ(by_other.of_project.count, 1);
  EXPECT_EQ(by_other.of_project.stored_bytes, 25);
  const PartFacts mine = this->put(this->demo_, this->token_, "u4", 0, 2, std::string(1, 'f'), 10);
  EXPECT_EQ(mine.of_token.count, 2);
  EXPECT_EQ(mine.of_token.stored_bytes, 32);
  EXPECT_EQ(mine.of_project.count, 2);
  EXPECT_EQ(mine.of_project.stored_bytes, 28);

  const UploadState state =
      *this->tx([&](UploadTransaction& t) { return t.state(this->demo_, this->token_, "u1"); });
  EXPECT_EQ(state.parts, 3);
  ASSERT_EQ(state.received.size(), 2U);
  EXPECT_EQ(state.received[0].part, 0);
  EXPECT_EQ(state.received[1].sha256, "sha-" + std::string(20, 'b'));
  EXPECT_EQ(state.bytes, 250);
  EXPECT_EQ(state.stored_bytes, 25);
  EXPECT_FALSE(this->tx([&](UploadTransaction& t) { return t.state(this->demo_, this->other_token_, "u1"); }))
      << "another token's upload is none of its";
}

TYPED_TEST_P(UploadStoreContract, ARefusedPartLeavesNothingAndAProjectIsFoundByName) {
  EXPECT_THROW(this->tx([&](UploadTransaction& t) {
    t.put_part(this->demo_, this->token_, "u1", 0, 2, PartBody{"x", true, 1, "s"},
               [](const PartFacts&) { throw Conflict("refused", "by the test"); });
  }),
               Conflict);
  EXPECT_FALSE(this->tx([&](UploadTransaction& t) { return t.state(this->demo_, this->token_, "u1"); }));
  EXPECT_EQ(this->tx([](UploadTransaction& t) { return t.existing_project_id("other"); }),
            this->other_project_);
  EXPECT_THROW(this->tx([](UploadTransaction& t) { return t.existing_project_id("nowhere"); }), NotFound);
}

TYPED_TEST_P(UploadStoreContract, AnUploadIsClaimedOnceWhenCompleteAndReleasedOrCompleted) {
  this->put(this->demo_, this->token_, "u1", 1, 2, "second", 60);
  std::optional<UploadState> state;
  auto claim = [&] {
    return this->tx([&](UploadTransaction& t) { return t.claim(this->demo_, this->token_, "u1", state); });
  };
  EXPECT_FALSE(claim()) << "a part missing";
  ASSERT_TRUE(state);
  EXPECT_EQ(state->received.size(), 1U);
  this->put(this->demo_, this->token_, "u1", 0, 2, "first", 50);
  const auto bodies = claim();
  ASSERT_TRUE(bodies);
  ASSERT_EQ(bodies->size(), 2U);
  EXPECT_EQ((*bodies)[0].data, "first");
  EXPECT_TRUE((*bodies)[1].gzip);
  EXPECT_THROW(claim(), Conflict) << "being completed";
  PartFacts completing;
  this->tx([&](UploadTransaction& t) {
    t.put_part(this->demo_, this->token_, "u1", 0, 2, PartBody{"x", true, 1, "s"},
               [&](const PartFacts& facts) { completing = facts; });
  });
  EXPECT_TRUE(completing.completing);
  this->tx([&](UploadTransaction& t) { t.release(this->demo_, "u1"); });
  ASSERT_TRUE(claim()) << "released, it may be claimed again";
  const std::int64_t run = this->stored_run();
  this->tx([&](UploadTransaction& t) { t.completed(this->demo_, "u1", run); });
  EXPECT_FALSE(claim());
  EXPECT_EQ(state->run_id, run);
  EXPECT_EQ(this->tx([&](UploadTransaction& t) { return t.verdict_of(run); }), "pass");
  EXPECT_TRUE(state->received.empty()) << "its parts dropped";
  const PartFacts late = this->put(this->demo_, this->token_, "u9", 0, 1, "z", 1);
  EXPECT_EQ(late.of_token.count, 0) << "a completed upload is no open one";
}

// A completion killed with its server or database leaves its claim: it lapses
// in seconds, not the quarter of an hour that stranded reports.
TYPED_TEST_P(UploadStoreContract, AClaimLeftByACompletionThatDiedLapsesInSeconds) {
  this->put(this->demo_, this->token_, "u1", 0, 1, "only", 4);
  std::optional<UploadState> state;
  auto claim = [&] {
    return this->tx([&](UploadTransaction& t) { return t.claim(this->demo_, this->token_, "u1", state); });
  };
  ASSERT_TRUE(claim());
  this->harness_.age_upload_claims(kCompletionClaimSeconds - 5);
  EXPECT_THROW(claim(), Conflict) << "still within its claim";
  this->harness_.age_upload_claims(10);
  EXPECT_TRUE(claim()) << "lapsed";
}

// A shard's report sent as an upload is done once its job took it: out of
// the quotas, its parts kept to answer a resend, and open again only when a
// part comes anew.
TYPED_TEST_P(UploadStoreContract, AnUploadTakenAsAShardIsNoOpenOneAndMayBeResent) {
  this->put(this->demo_, this->token_, "u1", 0, 1, "shard", 5);
  std::optional<UploadState> state;
  auto claim = [&] {
    return this->tx([&](UploadTransaction& t) { return t.claim(this->demo_, this->token_, "u1", state); });
  };
  ASSERT_TRUE(claim());
  this->tx([&](UploadTransaction& t) { t.taken_as_shard(this->demo_, "u1", 41); });
  EXPECT_EQ(this->put(this->demo_, this->token_, "u2", 0, 1, "z", 1).of_token.count, 0)
      << "a shard's upload its job took is no open one";
  const auto again = claim();
  ASSERT_TRUE(again) << "a resend completes it again, as the shard's job answers";
  EXPECT_EQ((*again)[0].data, "shard");
  this->tx([&](UploadTransaction& t) { t.taken_as_shard(this->demo_, "u1", 41); });
  this->put(this->demo_, this->token_, "u1", 0, 1, "anew", 4);
  EXPECT_EQ(this->put(this->demo_, this->token_, "u3", 0, 1, "z", 1).of_token.count, 2)
      << "a part sent anew opens it again (u1 and u2)";
}

REGISTER_TYPED_TEST_SUITE_P(UploadStoreContract, APartIsJudgedByTheUploadsAndTheOtherOpenUploadsFacts,
                            ARefusedPartLeavesNothingAndAProjectIsFoundByName,
                            AnUploadIsClaimedOnceWhenCompleteAndReleasedOrCompleted,
                            AClaimLeftByACompletionThatDiedLapsesInSeconds,
                            AnUploadTakenAsAShardIsNoOpenOneAndMayBeResent);

}  // namespace kw::server::testing
