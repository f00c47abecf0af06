// module_digests on cubins nvcc wrote from one source in variants
// (tests/digest_module.cu): a kernel's digest moves with its own code, its
// launch resources and the module's data, and with nothing else.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kw/common/module_digest.hpp"

namespace {

kw::common::ModuleDigests digests_of(const std::string& variant) {
  std::ifstream in(std::string(KW_DIGEST_CUBINS) + "/" + variant + ".cubin", std::ios::binary);
  EXPECT_TRUE(in) << variant;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return kw::common::module_digests(bytes.str());
}

const char* const kK1 = "_Z2k1Pf";
const char* const kK2 = "_Z2k2Pfi";
const char* const kT128 = "_Z2ktILi128EEvPf";
const char* const kT256 = "_Z2ktILi256EEvPf";

TEST(ModuleDigest, EveryKernelOfACubinHasADigestOfItsOwn) {
  const auto base = digests_of("base");
  EXPECT_EQ(base.format, "cubin");
  EXPECT_EQ(base.problem, "");
  ASSERT_EQ(base.kernels.size(), 4U);
  EXPECT_NE(base.kernels.at(kT128), base.kernels.at(kT256));
  EXPECT_EQ(base.kernels, digests_of("base").kernels);
}

TEST(ModuleDigest, ChangingOneKernelMovesOnlyItsDigest) {
  const auto base = digests_of("base"), changed = digests_of("k2_changed");
  EXPECT_NE(base.image_digest, changed.image_digest);
  EXPECT_NE(base.kernels.at(kK2), changed.kernels.at(kK2));
  for (const char* kernel : {kK1, kT128, kT256})
    EXPECT_EQ(base.kernels.at(kernel), changed.kernels.at(kernel)) << kernel;
}

TEST(ModuleDigest, AddingAKernelToTheModuleMovesNoOtherDigest) {
  const auto base = digests_of("base"), extra = digests_of("extra_kernel");
  EXPECT_EQ(extra.kernels.size(), 5U);
  for (const char* kernel : {kK1, kK2, kT128, kT256})
    EXPECT_EQ(base.kernels.at(kernel), extra.kernels.at(kernel)) << kernel;
}

TEST(ModuleDigest, TheModulesConstantDataIsPartOfEveryKernel) {
  const auto base = digests_of("base"), scaled = digests_of("scale_changed");
  for (const char* kernel : {kK1, kK2, kT128, kT256})
    EXPECT_NE(base.kernels.at(kernel), scaled.kernels.at(kernel)) << kernel;
}

TEST(ModuleDigest, ACompilerFlagThatChangesTheCodeMovesTheDigests) {
  const auto base = digests_of("base"), o1 = digests_of("ptxas_o1");
  int moved = 0;
  for (const auto& [kernel, digest] : base.kernels) moved += o1.kernels.at(kernel) != digest;
  EXPECT_GT(moved, 0);
}

TEST(ModuleDigest, AnotherArchitectureIsAnotherDigest) {
  const auto base = digests_of("base"), sm80 = digests_of("sm80");
  for (const auto& [kernel, digest] : base.kernels) EXPECT_NE(sm80.kernels.at(kernel), digest) << kernel;
}

TEST(ModuleDigest, LineInformationIsNotCode) {
  const auto base = digests_of("base"), lines = digests_of("lineinfo");
  EXPECT_NE(base.image_digest, lines.image_digest);
  EXPECT_EQ(base.kernels, lines.kernels);
}

TEST(ModuleDigest, PtxEntriesShareTheTextsDigest) {
  const std::string ptx =
      ".version 8.0\n.target sm_90\n.visible .entry first(\n.param .u64 p)\n{ ret; }\n"
      ".visible .entry second(\n) { ret; }\n";
  const auto digests = kw::common::module_digests(ptx);
  EXPECT_EQ(digests.format, "ptx");
  ASSERT_EQ(digests.kernels.size(), 2U);
  EXPECT_EQ(digests.kernels.at("first"), digests.image_digest);
  EXPECT_EQ(digests.kernels.at("second"), digests.image_digest);
}

TEST(ModuleDigest, ACutCubinIsDigestedWholeWithTheReason) {
  std::ifstream in(std::string(KW_DIGEST_CUBINS) + "/base.cubin", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const auto digests = kw::common::module_digests(bytes.str().substr(0, 200));
  EXPECT_EQ(digests.format, "other");
  EXPECT_TRUE(digests.kernels.empty());
  EXPECT_NE(digests.problem.find("cannot read"), std::string::npos) << digests.problem;
}

}  // namespace
