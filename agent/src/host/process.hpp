// What every part of kw shares about its own process: progress lines, the
// stop flag that SIGINT/SIGTERM raise, and the host's name.
#pragma once

#include <atomic>
#include <string>

namespace kw::agent {

// Raised by SIGINT/SIGTERM: the current stage is ended and the job given back.
std::atomic<bool>& stop_requested();

void say(const std::string& line);  // "[kw hh:mm:ss] ..." progress on stderr

std::string host_name();

// Now, as a report's timestamps are written: 2026-11-26T17:43:32.123Z.
std::string utc_now_rfc3339();

}  // namespace kw::agent
