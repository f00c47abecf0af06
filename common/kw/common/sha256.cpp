#include "kw/common/sha256.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kw::common {

namespace {

constexpr std::array<std::uint32_t, 64> kRound = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

void portable_block(std::array<std::uint32_t, 8>& state, const unsigned char* data) {
  std::array<std::uint32_t, 64> w{};
  for (std::size_t i = 0; i < 16; ++i) {
    w[i] = (std::uint32_t{data[4 * i]} << 24) | (std::uint32_t{data[4 * i + 1]} << 16) |
           (std::uint32_t{data[4 * i + 2]} << 8) | std::uint32_t{data[4 * i + 3]};
  }
  for (std::size_t i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::array<std::uint32_t, 8> v = state;
  for (std::size_t i = 0; i < 64; ++i) {
    const std::uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
    const std::uint32_t choice = (v[4] & v[5]) ^ (~v[4] & v[6]);
    const std::uint32_t t1 = v[7] + s1 + choice + kRound[i] + w[i];
    const std::uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
    const std::uint32_t majority = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    const std::uint32_t t2 = s0 + majority;
    v = {t1 + t2, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
  }
  for (std::size_t i = 0; i < 8; ++i) state[i] += v[i];
}

#if defined(__x86_64__)
// The SHA extensions' rounds (Intel's published sequence): the state held as
// ABEF and CDGH, four rounds per message group, the schedule by msg1/msg2.
__attribute__((target("sha,sse4.1,ssse3"))) void x86_blocks(std::array<std::uint32_t, 8>& state,
                                                            const unsigned char* data, std::size_t count) {
  const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0])), 0xB1);
  __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4])), 0x1B);
  __m128i abef = _mm_alignr_epi8(dcba, hgfe, 8);
  __m128i cdgh = _mm_blend_epi16(hgfe, dcba, 0xF0);
  for (; count > 0; --count, data += 64) {
    const __m128i abef_before = abef, cdgh_before = cdgh;
    __m128i group[4];  // the last four message groups (a std::array would drop __m128i's alignment)
    for (std::size_t t = 0; t < 16; ++t) {
      __m128i& words = group[t % 4];
      if (t < 4) {
        words = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + 16 * t)), byte_swap);
      } else {
        const __m128i& previous = group[(t + 3) % 4];
        words = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(words, group[(t + 1) % 4]),
                                                   _mm_alignr_epi8(previous, group[(t + 2) % 4], 4)),
                                     previous);
      }
      __m128i message =
          _mm_add_epi32(words, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRound[4 * t])));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, message);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(message, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_before);
    cdgh = _mm_add_epi32(cdgh, cdgh_before);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

bool detect_cpu_instructions() {
#if defined(__x86_64__)
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool ssse3 = (ecx & (1U << 9)) != 0, sse41 = (ecx & (1U << 19)) != 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return ssse3 && sse41 && (ebx & (1U << 29)) != 0;
#else
  return false;
#endif
}

}  // namespace

bool sha256_cpu_instructions() {
  static const bool has = detect_cpu_instructions();
  return has;
}

Sha256::Sha256(bool portable)
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19},
      cpu_instructions_(!portable && sha256_cpu_instructions()) {}

void Sha256::blocks(const unsigned char* data, std::size_t count) {
#if defined(__x86_64__)
  if (cpu_instructions_) return x86_blocks(state_, data, count);
#endif
  for (; count > 0; --count, data += 64) portable_block(state_, data);
}

Sha256& Sha256::update(std::string_view bytes) {
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t left = bytes.size();
  length_ += left;
  if (buffered_ > 0) {
    const std::size_t take = std::min(left, 64 - buffered_);
    std::memcpy(buffer_.data() + buffered_, data, take);
    buffered_ += take;
    data += take;
    left -= take;
    if (buffered_ < 64) return *this;
    blocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  blocks(data, left / 64);
  data += left / 64 * 64;
  left %= 64;
  std::memcpy(buffer_.data(), data, left);
  buffered_ = left;
  return *this;
}

std::array<unsigned char, 32> Sha256::digest() {
  const std::uint64_t bits = length_ * 8;
  const unsigned char pad = 0x80;
  update(std::string_view(reinterpret_cast<const char*>(&pad), 1));
  const std::array<char, 64> zeros{};
  update(std::string_view(zeros.data(), (buffered_ <= 56 ? 56 : 120) - buffered_));
  std::array<char, 8> size{};
  for (std::size_t i = 0; i < 8; ++i) size[i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
  update(std::string_view(size.data(), size.size()));
  std::array<unsigned char, 32> out{};
  for (std::size_t i = 0; i < 32; ++i)
    out[i] = static_cast<unsigned char>(state_[i / 4] >> (24 - 8 * (i % 4)));
  return out;
}

namespace {

std::string to_hex(const std::array<unsigned char, 32>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned char byte : bytes) {
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0xf]);
  }
  return out;
}

std::string_view bytes_of(const std::array<unsigned char, 32>& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

}  // namespace

std::string Sha256::hex() {
  return to_hex(digest());
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  std::array<char, 64> block{};
  if (key.size() > block.size()) {
    const std::array<unsigned char, 32> hashed = Sha256().update(key).digest();
    std::memcpy(block.data(), hashed.data(), hashed.size());
  } else {
    std::memcpy(block.data(), key.data(), key.size());
  }
  std::array<char, 64> inner_pad{}, outer_pad{};
  for (std::size_t i = 0; i < block.size(); ++i) {
    inner_pad[i] = static_cast<char>(block[i] ^ 0x36);
    outer_pad[i] = static_cast<char>(block[i] ^ 0x5c);
  }
  const std::array<unsigned char, 32> inner =
      Sha256().update(std::string_view(inner_pad.data(), inner_pad.size())).update(data).digest();
  return to_hex(
      Sha256().update(std::string_view(outer_pad.data(), outer_pad.size())).update(bytes_of(inner)).digest());
}

}  // namespace kw::common
