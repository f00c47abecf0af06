// A measurement's replicate tags as `samples` keeps them (schema 029): where
// they are blocks in order (replicate 0's samples, then 1's, ...), only the
// blocks' sizes; otherwise the tags themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kw::server {

// The block sizes of tags that are blocks 0, 1, 2, ... in order; nullopt
// for any other tags.
inline std::optional<std::vector<std::int64_t>> replicate_block_sizes(const std::vector<std::int64_t>& tags) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t tag : tags) {
    if (tag == static_cast<std::int64_t>(sizes.size()) - 1) {
      ++sizes.back();
    } else if (tag == static_cast<std::int64_t>(sizes.size())) {
      sizes.push_back(1);
    } else {
      return std::nullopt;
    }
  }
  return sizes;
}

// The tags that block sizes stand for (kw_replicate_tags in SQL).
inline std::vector<std::int64_t> replicate_tags(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> tags;
  for (std::size_t block = 0; block < sizes.size(); ++block)
    tags.insert(tags.end(), static_cast<std::size_t>(sizes[block]), static_cast<std::int64_t>(block));
  return tags;
}

}  // namespace kw::server
