// The host's GPU as the agent reports it for a bench whose output names no
// device: the CUDA runtime's view of device 0, in a form the run report
// accepts. Skipped where there is no CUDA device.
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include "../../tests/support/report_factory.hpp"
#include "host/gpu_info.hpp"
#include "kw/common/run_report.hpp"

namespace {

TEST(HostGpuDeviceTest, IsDeviceZeroAsTheCudaRuntimeSeesItAndTheReportAcceptsIt) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  cudaDeviceProp properties{};
  ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
  nlohmann::json device = kw::agent::host_gpu_device();
  ASSERT_TRUE(device.is_object()) << "no device from the CUDA driver";
  EXPECT_EQ(device["kind"], "gpu");
  EXPECT_EQ(device["name"], properties.name);
  EXPECT_EQ(device["compute_capability"],
            std::to_string(properties.major) + "." + std::to_string(properties.minor));
  EXPECT_EQ(device["sm_count"], properties.multiProcessorCount);
  EXPECT_EQ(device["l2_bytes"], properties.l2CacheSize);
  EXPECT_EQ(device["memory_bytes"].get<std::int64_t>(), static_cast<std::int64_t>(properties.totalGlobalMem));
  EXPECT_FALSE(device.value("driver", "").empty()) << device.dump();

  nlohmann::json report = kw::testing::make_report(kw::testing::ReportSpec{});
  report["device"] = device;
  EXPECT_NO_THROW(kw::common::parse_run_report(report)) << device.dump();
}

}  // namespace
