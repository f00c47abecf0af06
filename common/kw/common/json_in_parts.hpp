// A large JSON document parsed on every core: a run report is one object
// whose "cases" array holds nearly all of its bytes (30 MiB at 10,000
// cases), and its elements can be parsed apart.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kw::common {

// nlohmann::json::parse(text), the same value and the same exception, with
// the elements of the top-level object's largest array parsed in parallel.
// Any text that is not a plain object with such an array (or that fails to
// parse) is parsed whole, so its error is the parser's own.
nlohmann::json parse_in_parts(std::string_view text);

}  // namespace kw::common
