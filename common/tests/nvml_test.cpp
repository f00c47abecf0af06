// The NVML loader on whatever host runs it: without the driver library (CI)
// every query says so; with it (the GPU machine) every GPU has a name and a
// UUID, and a GPU that is not there is named as missing.
#include "kw/common/nvml.hpp"

#include <gtest/gtest.h>

namespace kw::common {
namespace {

TEST(Nvml, AHostWithoutTheDriverLibraryGetsAReasonAndNoDevice) {
  const Nvml nvml;
  if (nvml.ok()) GTEST_SKIP() << "this host has NVML";
  EXPECT_EQ(nvml.why().rfind("NVML unavailable", 0), 0u) << nvml.why();
  std::string why;
  EXPECT_EQ(nvml.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000", why), nullptr);
  EXPECT_EQ(why, nvml.why());
  EXPECT_FALSE(nvml.device_count().has_value());
  unsigned mhz = 0;
  EXPECT_EQ(nvml.call(nullptr, "nvmlDeviceGetClockInfo", 1, &mhz), Nvml::kNotSupported);
  EXPECT_EQ(nvml.driver_version(), "");
}

TEST(Nvml, AHostWithTheDriverNamesEveryGpuAndOneItLacks) {
  const Nvml nvml;
  if (!nvml.ok()) GTEST_SKIP() << nvml.why();
  EXPECT_FALSE(nvml.driver_version().empty());
  ASSERT_TRUE(nvml.device_count().has_value());
  for (unsigned i = 0; i < *nvml.device_count(); ++i) {
    void* device = nvml.device_by_index(i);
    ASSERT_NE(device, nullptr) << i;
    EXPECT_FALSE(nvml.device_name(device).empty()) << i;
    EXPECT_EQ(nvml.device_uuid(device).rfind("GPU-", 0), 0u) << i;
    unsigned mhz = 0;
    EXPECT_EQ(nvml.call(device, "nvmlDeviceGetClockInfo", 1, &mhz), 0) << i;
    EXPECT_EQ(nvml.call(device, "nvmlNoSuchCall", &mhz), Nvml::kNotSupported) << i;
  }
  std::string why;
  EXPECT_EQ(nvml.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000", why), nullptr);
  EXPECT_EQ(why.rfind("NVML has no GPU", 0), 0u) << why;
}

}  // namespace
}  // namespace kw::common
