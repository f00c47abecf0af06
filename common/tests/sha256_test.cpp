// SHA-256 against FIPS 180-4's examples and the system's sha256sum, fed in
// pieces of every size, the CPU's SHA instructions against the portable
// rounds; HMAC-SHA256 against RFC 4231.
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

// Where the CPU has SHA instructions they are used, and agree with the
// portable rounds on every length and alignment (1 to 9 blocks at once).
TEST(Sha256, TheCpusInstructionsAgreeWithThePortableRounds) {
  if (!sha256_cpu_instructions()) GTEST_SKIP() << "this CPU has no SHA instructions";
  std::mt19937 rng(5);
  std::string text(700, '\0');
  for (char& c : text) c = static_cast<char>(rng() & 0xff);
  for (std::size_t offset : {0u, 1u, 3u}) {
    for (std::size_t length = 0; length + offset <= text.size(); ++length) {
      const std::string_view part = std::string_view(text).substr(offset, length);
      ASSERT_EQ(Sha256().update(part).hex(), Sha256(true).update(part).hex()) << offset << " " << length;
    }
  }
}

TEST(HmacSha256, Rfc4231) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_sha256_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // A key longer than a block is hashed first (test case 6).
  EXPECT_EQ(
      hmac_sha256_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

}  // namespace
}  // namespace kw::common
