// SHA-256 (FIPS 180-4) without OpenSSL, for what kw and kw-server must hash
// alike: an upload part's content, a case's fingerprint. Streaming: update()
// any number of times, then hex().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kw::common {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view bytes);
  // The digest as 64 lower-case hex digits; the object is spent after it.
  std::string hex();

 private:
  void block(const unsigned char* data);
  std::array<std::uint32_t, 8> state_{};
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  // bytes hashed
};

inline std::string sha256_hex(std::string_view bytes) {
  return Sha256().update(bytes).hex();
}

}  // namespace kw::common
