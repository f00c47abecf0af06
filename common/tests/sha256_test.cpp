// SHA-256 against FIPS 180-4's examples and the system's sha256sum, fed in
// pieces of every size.
#include "kw/common/sha256.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

namespace kw::common {
namespace {

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PiecesOfAnySizeHashAsTheWhole) {
  std::mt19937 rng(3);
  std::string text(10'000, '\0');
  for (char& c : text) c = static_cast<char>(rng() & 0xff);
  const std::string whole = sha256_hex(text);
  for (std::size_t piece : {1u, 7u, 55u, 56u, 63u, 64u, 65u, 1000u}) {
    Sha256 hash;
    for (std::size_t at = 0; at < text.size(); at += piece)
      hash.update(std::string_view(text).substr(at, piece));
    EXPECT_EQ(hash.hex(), whole) << piece;
  }
  // Every length around the padding boundary, against sha256sum.
  const std::string file = ::testing::TempDir() + "kw-sha256-test";
  for (std::size_t length : {55u, 56u, 57u, 63u, 64u, 119u, 120u, 121u}) {
    FILE* out = std::fopen(file.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(std::fwrite(text.data(), 1, length, out), length);
    std::fclose(out);
    FILE* pipe = popen(("sha256sum " + file).c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char digest[65] = {};
    ASSERT_EQ(std::fread(digest, 1, 64, pipe), 64u);
    pclose(pipe);
    EXPECT_EQ(sha256_hex(std::string_view(text).substr(0, length)), digest) << length;
  }
}

}  // namespace
}  // namespace kw::common
