// The bench's hand-written launch table (bench/expected_launches.hpp) and
// the library's dispatch agree on every case the bench lists. No GPU needed:
// both sides are host code. A dispatch change without its table row fails
// here; a dispatch mistake that reaches a GPU fails launch_geometry there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../../../tests/support/subprocess.hpp"
#include "../../../tests/support/temp_dir.hpp"
#include "kw_attention/attention.hpp"

namespace {

using nlohmann::json;

json list_cases() {
  const std::filesystem::path dir = kw::testing::make_temp_dir("kw-attention-list");
  const std::string out = (dir / "list.json").string();
  kw::testing::CommandResult result = kw::testing::run_command({KW_ATTENTION_BENCH, "--list", "--json", out});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(out);
  json listed = json::parse(in);
  std::filesystem::remove_all(dir);
  return listed["cases"];
}

kw::attention::ForwardParams shape_of(const json& params) {
  kw::attention::ForwardParams shape;
  shape.dtype = params["dtype"] == "fp16" ? kw::attention::DType::fp16 : kw::attention::DType::bf16;
  shape.batch = params["batch"];
  shape.heads = params["heads"];
  shape.seqlen_q = params.contains("seqlen") ? params["seqlen"].get<int>() : params["seqlen_q"].get<int>();
  shape.seqlen_k = params.contains("seqlen") ? params["seqlen"].get<int>() : params["seqlen_k"].get<int>();
  shape.head_dim = params["head_dim"];
  shape.causal = params["causal"];
  return shape;
}

TEST(ExpectedLaunchesTest, TheTableNamesTheKernelTheDispatchLaunchesForEveryCase) {
  const json cases = list_cases();
  ASSERT_GE(cases.size(), 96u);
  int short_kernel = 0, masking = 0;
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const json& expected = c["expected_launch"];
    const kw::attention::LaunchShape launched = kw::attention::launch_shape(shape_of(c["params"]));
    EXPECT_EQ(expected["kernel_pattern"], launched.kernel_pattern);
    EXPECT_EQ(expected["grid"], json({launched.grid.x, launched.grid.y, launched.grid.z}));
    EXPECT_EQ(expected["block"], json({launched.block.x, launched.block.y, launched.block.z}));
    EXPECT_EQ(expected["max_shared_bytes"], launched.dynamic_smem);
    short_kernel += launched.kernel_pattern.find("ForwardTraits<64, 16, 64") != std::string::npos;
    if (c["params"]["group"] == "masking") {
      ++masking;
      EXPECT_FALSE(c["timed"].get<bool>()) << "edge shapes are checked, not timed";
    }
  }
  EXPECT_GT(short_kernel, 0);
  EXPECT_EQ(masking, 24) << "6 shapes x causal or not x 2 dtypes";
}

}  // namespace
