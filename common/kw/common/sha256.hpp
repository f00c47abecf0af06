// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), the one kw and kw-server
// use for everything they hash: an upload part's content, a case's
// fingerprint, a report's identity, an API token, a webhook's signature.
// Without OpenSSL (kw is built without it too); on x86-64 CPUs with the SHA
// extensions, those instructions. Streaming: update() any number of times,
// then hex() or digest().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kw::common {

class Sha256 {
 public:
  // `portable`: the plain C++ rounds even where the CPU has SHA
  // instructions (to hold one against the other).
  explicit Sha256(bool portable = false);
  Sha256& update(std::string_view bytes);
  // The digest; the object is spent after it.
  std::array<unsigned char, 32> digest();
  // The digest as 64 lower-case hex digits; the object is spent after it.
  std::string hex();

 private:
  void blocks(const unsigned char* data, std::size_t count);
  std::array<std::uint32_t, 8> state_{};
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  // bytes hashed
  bool cpu_instructions_ = false;
};

inline std::string sha256_hex(std::string_view bytes) {
  return Sha256().update(bytes).hex();
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data);

// Whether this CPU hashes with its SHA instructions.
bool sha256_cpu_instructions();

}  // namespace kw::common
