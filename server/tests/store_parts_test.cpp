// The store's parts that need no database: the read cache's bookkeeping
// (which answers it keeps, and for how long) and PostgreSQL's array text as
// the store reads and writes it. Through a real PostgreSQL: read_cache_test.cpp
// and PgArrayTest.BinaryArraysRoundTripThroughPostgres.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "service/read_cache.hpp"
#include "store/pg_array.hpp"

namespace kw::server::testing {
namespace {

TEST(PgArrayTest, ParsesNumbersAndArraysAndNamesWhatItCannot) {
  EXPECT_EQ(parse_pg_array<double>("{1.5,2,3e+06}"), (std::vector<double>{1.5, 2, 3e6}));
  EXPECT_EQ(parse_pg_array<std::int64_t>("{}"), std::vector<std::int64_t>{});
  EXPECT_EQ(parse_pg_number<double>("-0.25"), -0.25);
  EXPECT_THROW(parse_pg_array<double>("1,2"), std::runtime_error);
  EXPECT_THROW(parse_pg_array<double>("{1,x}"), std::runtime_error);
  EXPECT_THROW(parse_pg_number<std::int64_t>("12abc"), std::runtime_error);
  PgArray built;
  built.number(4);
  built.number(2.5);
  EXPECT_EQ(parse_pg_array<double>(built.str()), (std::vector<double>{4, 2.5}));
}

TEST(ReadCacheUnitTest, AnAnswerReadBeforeAChangeIsNotKept) {
  ReadCache cache;
  cache.set_enabled(true);
  ReadCache::Ticket before = cache.ticket("demo");
  cache.changed("demo");  // a commit lands while the read runs
  cache.put(before, "demo", "series", "old");
  EXPECT_FALSE(cache.get("demo", "series"));
  cache.put(cache.ticket("demo"), "demo", "series", "new");
  EXPECT_EQ(cache.get("demo", "series"), "new");

  ReadCache::Ticket other = cache.ticket("other");
  cache.changed_all();  // the feed reconnected: changes may have been missed
  cache.put(other, "other", "series", "old");
  EXPECT_FALSE(cache.get("other", "series"));
  EXPECT_FALSE(cache.get("demo", "series"));
}

TEST(ReadCacheUnitTest, ADisabledCacheServesAndKeepsNothing) {
  ReadCache cache;
  cache.put(cache.ticket("demo"), "demo", "k", "answer");
  EXPECT_FALSE(cache.get("demo", "k"));
  cache.set_enabled(true);
  cache.put(cache.ticket("demo"), "demo", "k", "answer");
  ReadCache::Ticket held = cache.ticket("demo");
  cache.set_enabled(false);
  EXPECT_FALSE(cache.get("demo", "k"));
  cache.set_enabled(true);
  EXPECT_FALSE(cache.get("demo", "k")) << "answers kept before the feed went down are gone";
  cache.put(held, "demo", "k", "answer");
  EXPECT_FALSE(cache.get("demo", "k")) << "a ticket taken before the outage is void";
}

TEST(ReadCacheUnitTest, TheLeastRecentlyUsedAnswersGoFirstWhenFull) {
  ReadCache cache(4000);  // an answer may take a quarter: 1000 bytes
  cache.set_enabled(true);
  const std::string answer(900, 'x');
  for (const char* key : {"a", "b", "c", "d"}) cache.put(cache.ticket("p"), "p", key, answer);
  EXPECT_TRUE(cache.get("p", "a"));  // now the most recent
  cache.put(cache.ticket("p"), "p", "e", answer);
  EXPECT_TRUE(cache.get("p", "a"));
  EXPECT_FALSE(cache.get("p", "b"));
  EXPECT_LE(cache.counters().bytes, 4000u);
  cache.put(cache.ticket("p"), "p", "huge", std::string(1001, 'x'));
  EXPECT_FALSE(cache.get("p", "huge"));
}

}  // namespace
}  // namespace kw::server::testing
