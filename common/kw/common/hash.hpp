// FNV-1a over bytes: a hash that is the same in every build and on every
// host (std::hash is neither), for names and cache keys kept on disk. Not
// for anything an attacker chooses the input of.
#pragma once

#include <cstdint>
#include <string_view>

namespace kw::common {

inline std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace kw::common
