// What this process has used, for tests and benches that measure the cost
// of a request to an in-process kw-server: CPU seconds, and the peak of its
// resident memory from a point on (the kernel's high-water mark, reset).
#pragma once

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace kw::testing {

// CPU seconds, user and system, of every thread of this process.
inline double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// A field of /proc/self/status in KiB (VmRSS, VmHWM); 0 when absent.
inline long status_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return 0;
}

// Resets the high-water mark to the current RSS (clear_refs 5) and returns
// it: a later status_kib("VmHWM") minus this is the peak growth since.
inline long reset_peak_kib() {
  std::ofstream("/proc/self/clear_refs") << "5";
  return status_kib("VmRSS");
}

}  // namespace kw::testing
