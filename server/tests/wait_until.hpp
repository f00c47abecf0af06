// Waiting for a condition by polling it, never by a fixed sleep before an
// assertion.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace kw::server::testing {

// Polls `condition` every 25 ms for up to `limit`: changes other threads or
// servers make (notifications, replication) arrive within milliseconds. The
// condition is asked once a poll and its last answer is the verdict: asking
// again would make a read that changes what it reads (a cache hit counted)
// fail after it succeeded.
template <typename Condition>
void wait_until(Condition condition, const std::string& what,
                std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  bool met = condition();
  for (auto waited = std::chrono::milliseconds(0); waited < limit && !met;
       waited += std::chrono::milliseconds(25)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    met = condition();
  }
  ASSERT_TRUE(met) << "waited " << limit.count() << " ms for " << what;
}

}  // namespace kw::server::testing
