// gzip (RFC 1952) for request bodies: `kw` compresses its run reports and
// kw-server decompresses them within a limit on the decompressed size. On
// Boost.Beast's deflate, so neither side needs zlib's headers.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kw::http {

// The input is not gzip, is cut short, or fails its CRC/length check.
class GzipError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The input would decompress to more than the limit. Thrown as soon as the
// output passes it, so a small body that expands without end costs no more
// than the limit.
class GzipTooLarge : public GzipError {
 public:
  using GzipError::GzipError;
};

// level: 1 (fastest) to 9 (smallest).
std::string gzip_compress(std::string_view data, int level = 1);

// Every member of the input, concatenated, as gzip -d writes it; more than
// `max_members` members is an error (a sender joins a few at most, and each
// empty member costs a pass of its own). `on_grow`, when set, is told each
// new size of the output buffer before it is allocated, and may throw (a
// memory budget shared by requests).
inline constexpr std::size_t kGzipMaxMembers = 64;
std::string gzip_decompress(std::string_view gzip, std::size_t max_size,
                            const std::function<void(std::size_t)>& on_grow = {},
                            std::size_t max_members = kGzipMaxMembers);

}  // namespace kw::http
