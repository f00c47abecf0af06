// The agent's host code digests (agent/src/pipeline/fingerprint.hpp) on
// programs nvcc linked from one source in variants (tests/digest_host.cu).
#include <gtest/gtest.h>

#include <filesystem>

#include "pipeline/fingerprint.hpp"

namespace {

std::string digest_of(const std::string& variant, const char* checkout = KW_DIGEST_SOURCE_ROOT) {
  std::string problem;
  auto digest = kw::agent::host_code_digests().digest(std::filesystem::path(KW_DIGEST_CUBINS) / variant,
                                                      problem, checkout);
  EXPECT_TRUE(digest.has_value()) << problem;
  return digest.value_or("");
}

TEST(HostDigest, AKernelThatChangesSizeLeavesTheHostCodeAlone) {
  EXPECT_NE(std::filesystem::file_size(std::filesystem::path(KW_DIGEST_CUBINS) / "host_base"),
            std::filesystem::file_size(std::filesystem::path(KW_DIGEST_CUBINS) / "host_k2_changed"));
  EXPECT_EQ(digest_of("host_base"), digest_of("host_k2_changed"));
}

TEST(HostDigest, AChangeToTheHostCodeMovesIt) {
  EXPECT_NE(digest_of("host_base"), digest_of("host_changed"));
}

TEST(HostDigest, AConstantTheHostCodeReadsIsPartOfIt) {
  EXPECT_NE(digest_of("host_base"), digest_of("host_constant_changed"));
}

// A base is built in another checkout than the head: __FILE__ differs in
// length, and every string after it moves.
TEST(HostDigest, TheCheckoutItWasBuiltInIsNotPartOfIt) {
  EXPECT_EQ(digest_of("host_base"), digest_of("host_moved", KW_DIGEST_MOVED_ROOT));
  EXPECT_NE(digest_of("host_base"), digest_of("host_moved"))
      << "the path is only left out where it is the checkout";
}

TEST(HostDigest, AFileThatIsNoProgramSaysSo) {
  std::string problem;
  EXPECT_FALSE(kw::agent::host_code_digests().digest(
      std::filesystem::path(KW_DIGEST_CUBINS) / "base.cubin.missing", problem));
  EXPECT_NE(problem.find("cannot be read"), std::string::npos) << problem;
  EXPECT_FALSE(kw::agent::host_code_digests().digest(__FILE__, problem));
  EXPECT_NE(problem.find("not a 64-bit ELF"), std::string::npos) << problem;
}

}  // namespace
