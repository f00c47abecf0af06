// kw's gzip against the system's gzip, in both directions, and every way a
// body can be refused.
#include "kw/http/gzip.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace {

using kw::http::gzip_compress;
using kw::http::gzip_decompress;
using kw::http::GzipError;
using kw::http::GzipTooLarge;
namespace fs = std::filesystem;

std::string some_json(std::size_t bytes) {
  std::mt19937 rng(7);
  std::normal_distribution<double> time(12345.0, 80.0);
  std::ostringstream out;
  out << "{\"samples_ns\":[";
  while (static_cast<std::size_t>(out.tellp()) < bytes) out << time(rng) << ",";
  out << "1]}";
  return out.str();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs a shell command over a file in a fresh directory; returns its stdout file's bytes.
std::string system_gzip(const std::string& input, const std::string& command) {
  const fs::path dir = fs::temp_directory_path() / ("kw-gzip-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in", std::ios::binary) << input;
  const std::string line = "cd '" + dir.string() + "' && " + command + " > out";
  EXPECT_EQ(std::system(line.c_str()), 0) << line;
  std::string out = read_file(dir / "out");
  fs::remove_all(dir);
  return out;
}

TEST(Gzip, RoundTripsEmptySmallAndLargeBodies) {
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{100'000}, std::size_t{5'000'000}}) {
    const std::string data = some_json(size);
    for (int level : {1, 6, 9})
      EXPECT_EQ(gzip_decompress(gzip_compress(data, level), data.size()), data) << size << " level " << level;
  }
}

TEST(Gzip, TheSystemGzipReadsOursAndWeReadTheSystems) {
  const std::string data = some_json(300'000);
  EXPECT_EQ(system_gzip(gzip_compress(data), "gzip -dc in"), data);
  // gzip names the file in its header (FNAME): skipped.
  const std::string theirs = system_gzip(data, "gzip -9 -c in");
  EXPECT_EQ(gzip_decompress(theirs, data.size()), data);
  // Two members, as `cat a.gz b.gz` makes them: both, in order.
  EXPECT_EQ(gzip_decompress(theirs + gzip_compress("tail"), data.size() + 4), data + "tail");
}

TEST(Gzip, ALimitStopsTheOutputAtOneByteMore) {
  const std::string zeros(std::size_t{10'000'000}, '0');
  const std::string compressed = gzip_compress(zeros);
  EXPECT_LT(compressed.size(), std::size_t{100'000});
  EXPECT_EQ(gzip_decompress(compressed, zeros.size()).size(), zeros.size());
  try {
    gzip_decompress(compressed, zeros.size() - 1);
    FAIL() << "no limit";
  } catch (const GzipTooLarge& e) {
    EXPECT_STREQ(e.what(), "gzip: decompresses to more than the limit of 9999999 bytes");
  }
}

// Empty members after a large one cost no allocation: the output grew to
// twice its size for every member (zero-filling it) before.
TEST(Gzip, TheOutputGrowsOnlyWhenFullAndMembersAreCapped) {
  const std::string large(std::size_t{8'000'000}, 'x');
  const std::string empty_member = gzip_compress("");
  std::string body = gzip_compress(large);
  for (std::size_t i = 1; i < kw::http::kGzipMaxMembers; ++i) body += empty_member;
  std::vector<std::size_t> sizes;
  EXPECT_EQ(gzip_decompress(body, large.size(), [&](std::size_t size) { sizes.push_back(size); }).size(),
            large.size());
  EXPECT_LE(sizes.size(), 9u) << "64 KiB doubled to 8 MB, and no more for the empty members";
  EXPECT_THROW(gzip_decompress(body + empty_member, large.size()), GzipError) << "one member past the cap";
  // A budget that refuses a size stops the inflation there.
  EXPECT_THROW(gzip_decompress(gzip_compress(large), large.size(),
                               [](std::size_t size) {
                                 if (size > 1'000'000) throw std::length_error("over budget");
                               }),
               std::length_error);
}

// The trailer's size is a hint for the first buffer; a lying one was taken
// up to the limit, and a body of two dozen bytes cost a 64 MiB zero-filled buffer.
TEST(Gzip, ALyingTrailerSizesNoBufferBeyondWhatTheInputCanInflateTo) {
  const std::string small = gzip_compress(std::string(100, 'x'));
  for (const std::uint32_t lie : {0xFFFFFFFFu, 64u << 20, 5000u}) {
    std::string body = small;
    for (int i = 0; i < 4; ++i) body[body.size() - 4 + i] = static_cast<char>((lie >> (8 * i)) & 0xFF);
    std::size_t largest = 0;
    EXPECT_THROW(gzip_decompress(body, std::size_t{64} << 20,
                                 [&](std::size_t size) { largest = std::max(largest, size); }),
                 GzipError)
        << "the length no longer matches";
    EXPECT_LE(largest, std::max<std::size_t>(body.size() * 1032 + 1, std::size_t{64} * 1024)) << lie;
  }
  // An honest hint still sizes the one buffer of a large body.
  const std::string zeros(std::size_t{10'000'000}, '0');
  std::vector<std::size_t> sizes;
  gzip_decompress(gzip_compress(zeros), zeros.size() + 1, [&](std::size_t size) { sizes.push_back(size); });
  EXPECT_EQ(sizes, std::vector<std::size_t>{zeros.size() + 1});
}

TEST(Gzip, CorruptOrCutInputIsRefusedNamingWhy) {
  const std::string good = gzip_compress(some_json(50'000));
  auto refusal = [](const std::string& input) {
    try {
      gzip_decompress(input, 1 << 20);
    } catch (const GzipTooLarge&) {
      return std::string("too large");
    } catch (const GzipError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("{\"plain\": true}"), "gzip: not gzip data (no 1f 8b magic at byte 0)");
  EXPECT_EQ(refusal(good.substr(0, 5)), "gzip: the header is cut short");
  EXPECT_EQ(refusal(good.substr(0, good.size() / 2)), "gzip: the data is cut short");
  EXPECT_EQ(refusal(good.substr(0, good.size() - 3)), "gzip: the trailer is cut short");
  std::string bad_crc = good;
  bad_crc[bad_crc.size() - 8] ^= 1;
  EXPECT_EQ(refusal(bad_crc), "gzip: CRC mismatch (the data is corrupt)");
  std::string bad_length = good;
  bad_length[bad_length.size() - 1] ^= 1;
  EXPECT_EQ(refusal(bad_length), "gzip: length mismatch (the data is corrupt)");
  std::string bad_method = good;
  bad_method[2] = 7;
  EXPECT_EQ(refusal(bad_method), "gzip: compression method 7 is not deflate (8)");
  std::string bad_data = good;
  bad_data[10] = static_cast<char>(0xff);  // a reserved block type
  EXPECT_NE(refusal(bad_data).find("gzip: corrupt deflate data"), std::string::npos) << refusal(bad_data);
}

}  // namespace
