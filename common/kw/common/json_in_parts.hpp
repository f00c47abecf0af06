// A large JSON document parsed on every core: a run report is one object
// whose "cases" array holds nearly all of its bytes (30 MiB at 10,000
// cases), and its elements can be parsed apart. Parsing keeps to limits
// counted as it goes, so a hostile body is refused at its first excess,
// never after its whole tree was built.
#pragma once

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kw/common/memory_budget.hpp"

namespace kw::common {

// What one document may cost while it is parsed.
struct JsonLimits {
  // Containers open at once: the top-level value is at depth 1.
  int max_depth = std::numeric_limits<int>::max();
  // An estimate of the memory the parsed value holds, allocation overhead
  // included (a `{}` of 3 bytes costs about 130).
  std::size_t max_memory = std::numeric_limits<std::size_t>::max();
  // Also taken from as the value grows; kept until the lease ends.
  MemoryLease* lease = nullptr;
};

class JsonTooDeep : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class JsonTooLarge : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// nlohmann::json::parse(text), the same value and the same exception, with
// the elements of the top-level object's largest array parsed in parallel.
// Any text that is not a plain object with such an array (or that fails to
// parse) is parsed whole, so its error is the parser's own. Past a limit,
// JsonTooDeep or JsonTooLarge (the first excess in document order), or
// MemoryBusy from the lease.
nlohmann::json parse_in_parts(std::string_view text, const JsonLimits& limits = {});

}  // namespace kw::common
