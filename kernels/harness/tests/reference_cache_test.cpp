// kwbench::ReferenceCache on the host (no GPU): entries come back as stored,
// only for their own key, and the oldest go once the cache is over its size.
#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "../../../tests/support/temp_dir.hpp"
#include "kwbench/kwbench.hpp"

namespace {

namespace fs = std::filesystem;

class ReferenceCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = kw::testing::make_temp_dir("kw-reference-cache"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ReferenceCacheTest, AnEntryComesBackOnlyForItsOwnKey) {
  auto file_of = [](const fs::path& dir, const std::string& key) {
    kwbench::ReferenceCache(dir).store(key, {0.0f});
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".ref") return entry.path().filename();
    return fs::path();
  };
  const std::vector<float> values = {1.5f, -2.25f, 3e-8f, 0.0f};
  kwbench::ReferenceCache cache(dir_ / "cache");
  EXPECT_FALSE(cache.load("case a seed 1"));
  cache.store("case a seed 1", values);
  EXPECT_EQ(cache.load("case a seed 1"), values);
  EXPECT_FALSE(cache.load("case a seed 2"));

  // A file that holds another key (as after a hash collision) is not served.
  const fs::path a_file = dir_ / "cache" / file_of(dir_ / "a", "case a seed 1");
  const fs::path b_file = dir_ / "cache" / file_of(dir_ / "b", "case b");
  fs::copy_file(a_file, b_file);
  EXPECT_FALSE(cache.load("case b"));
  // A truncated entry is a miss, not an error.
  fs::resize_file(a_file, fs::file_size(a_file) - 3);
  EXPECT_FALSE(cache.load("case a seed 1"));
  // No directory: no cache.
  kwbench::ReferenceCache off("");
  off.store("case a seed 1", values);
  EXPECT_FALSE(off.load("case a seed 1"));
}

TEST_F(ReferenceCacheTest, TheOldestEntriesGoPastTheSizeLimit) {
  const std::vector<float> values(1000, 1.0f);  // about 4 KB an entry
  kwbench::ReferenceCache cache(dir_, 10000);
  for (const char* key : {"first", "second", "third"}) {
    cache.store(key, values);
    // Every entry so far a second older: distinct write times, whatever the
    // file system's clock resolution, with no wait.
    for (const auto& entry : fs::directory_iterator(dir_))
      fs::last_write_time(entry.path(), entry.last_write_time() - std::chrono::seconds(1));
  }
  EXPECT_FALSE(cache.load("first"));
  EXPECT_TRUE(cache.load("second"));
  EXPECT_TRUE(cache.load("third"));
}

}  // namespace
