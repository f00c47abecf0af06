// Work over the items [0, n) split into contiguous parts run at once, one
// per core: a 10,000-case report is read, judged and written in a fraction
// of the time one core takes, on a server whose other cores wait on it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <future>
#include <thread>
#include <type_traits>
#include <vector>

namespace kw::common {

// `part(begin, end)` for each part, each at least `min_part` items (fewer
// items run as one part, on this thread); at most 8 parts, the first on
// the calling thread. Their results, in item order. An exception leaves
// through the first part (in item order) that threw, once every part ended.
template <typename Part>
auto in_parts(std::size_t n, std::size_t min_part, Part part) {
  using Result = std::invoke_result_t<Part&, std::size_t, std::size_t>;
  std::size_t parts = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  parts = std::min(parts, std::max<std::size_t>(1, n / std::max<std::size_t>(1, min_part)));
  std::vector<std::future<Result>> running;
  running.reserve(parts);
  for (std::size_t k = 0; k < parts; ++k) {
    running.push_back(std::async(k == 0 ? std::launch::deferred : std::launch::async, std::ref(part),
                                 n * k / parts, n * (k + 1) / parts));
  }
  std::vector<Result> results;
  results.reserve(parts);
  for (auto& result : running) results.push_back(result.get());
  return results;
}

}  // namespace kw::common
