#include "kw/http/gzip.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include <boost/beast/zlib/deflate_stream.hpp>
#include <boost/beast/zlib/inflate_stream.hpp>

namespace kw::http {

namespace zlib = boost::beast::zlib;

namespace {

constexpr unsigned char kId1 = 0x1f, kId2 = 0x8b, kDeflate = 8;
constexpr unsigned char kFlagHeaderCrc = 2, kFlagExtra = 4, kFlagName = 8, kFlagComment = 16;
constexpr int kWindowBits = 15;
// Deflate writes at most 1032 bytes for each byte it reads (a 258-byte match
// in 2 bits, RFC 1951): no honest trailer says more.
constexpr std::size_t kMaxDeflateRatio = 1032;

void put_le32(std::string& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint32_t get_le32(std::string_view in, std::size_t at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(in[at + static_cast<std::size_t>(i)]);
  return value;
}

// The offset of the deflate data of the member that starts at `at`.
std::size_t skip_header(std::string_view in, std::size_t at) {
  auto need = [&](std::size_t end) {
    if (end > in.size()) throw GzipError("gzip: the header is cut short");
  };
  need(at + 10);
  if (static_cast<unsigned char>(in[at]) != kId1 || static_cast<unsigned char>(in[at + 1]) != kId2)
    throw GzipError("gzip: not gzip data (no 1f 8b magic at byte " + std::to_string(at) + ")");
  if (static_cast<unsigned char>(in[at + 2]) != kDeflate)
    throw GzipError("gzip: compression method " + std::to_string(static_cast<unsigned char>(in[at + 2])) +
                    " is not deflate (8)");
  const auto flags = static_cast<unsigned char>(in[at + 3]);
  std::size_t pos = at + 10;
  if (flags & kFlagExtra) {
    need(pos + 2);
    pos += 2 + (static_cast<unsigned char>(in[pos]) |
                (static_cast<std::size_t>(static_cast<unsigned char>(in[pos + 1])) << 8));
  }
  for (unsigned char field : {kFlagName, kFlagComment}) {
    if (!(flags & field)) continue;
    const std::size_t end = in.find('\0', pos);
    if (end == std::string_view::npos) throw GzipError("gzip: the header is cut short");
    pos = end + 1;
  }
  if (flags & kFlagHeaderCrc) pos += 2;
  need(pos);
  return pos;
}

// CRC-32 (gzip's, reflected 0xEDB88320) eight bytes a step ("slicing by
// 8"): Boost's byte-at-a-time CRC took as long as inflating a 30 MiB report.
class Crc32 {
 public:
  void update(std::string_view data) {
    static const Tables tables = make_tables();
    std::uint32_t crc = ~crc_;
    const auto* at = reinterpret_cast<const unsigned char*>(data.data());
    std::size_t left = data.size();
    for (; left >= 8; left -= 8, at += 8) {
      const std::uint32_t low = load_le32(at) ^ crc, high = load_le32(at + 4);
      crc = tables[7][low & 0xff] ^ tables[6][(low >> 8) & 0xff] ^ tables[5][(low >> 16) & 0xff] ^
            tables[4][low >> 24] ^ tables[3][high & 0xff] ^ tables[2][(high >> 8) & 0xff] ^
            tables[1][(high >> 16) & 0xff] ^ tables[0][high >> 24];
    }
    for (; left > 0; --left, ++at) crc = tables[0][(crc ^ *at) & 0xff] ^ (crc >> 8);
    crc_ = ~crc;
  }
  std::uint32_t value() const { return crc_; }

 private:
  using Tables = std::array<std::array<std::uint32_t, 256>, 8>;
  static std::uint32_t load_le32(const unsigned char* at) {
    return at[0] | (std::uint32_t{at[1]} << 8) | (std::uint32_t{at[2]} << 16) | (std::uint32_t{at[3]} << 24);
  }
  static Tables make_tables() {
    Tables tables{};
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
      std::uint32_t crc = byte;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320U & (0U - (crc & 1U)));
      tables[0][byte] = crc;
    }
    for (std::size_t k = 1; k < 8; ++k) {
      for (std::size_t byte = 0; byte < 256; ++byte)
        tables[k][byte] = (tables[k - 1][byte] >> 8) ^ tables[0][tables[k - 1][byte] & 0xff];
    }
    return tables;
  }
  std::uint32_t crc_ = 0;
};

}  // namespace

std::string gzip_compress(std::string_view data, int level) {
  // Magic, deflate, no flags, no time, no extra flags, OS Unix.
  std::string out("\x1f\x8b\x08\0\0\0\0\0\0\x03", 10);
  zlib::deflate_stream deflate;
  deflate.reset(level, kWindowBits, 8, zlib::Strategy::normal);
  const std::size_t header = out.size();
  out.resize(header + deflate.upper_bound(data.size()));
  zlib::z_params params;
  params.next_in = data.data();
  params.avail_in = data.size();
  params.next_out = out.data() + header;
  params.avail_out = out.size() - header;
  boost::system::error_code ec;
  deflate.write(params, zlib::Flush::finish, ec);
  // upper_bound() room makes one finishing call enough.
  if (ec != zlib::error::end_of_stream) throw GzipError("gzip: deflate failed: " + ec.message());
  out.resize(header + params.total_out);
  Crc32 crc;
  crc.update(data);
  put_le32(out, crc.value());
  put_le32(out, static_cast<std::uint32_t>(data.size()));
  return out;
}

std::string gzip_decompress(std::string_view in, std::size_t max_size,
                            const std::function<void(std::size_t)>& on_grow, std::size_t max_members) {
  // `out` is the buffer, `filled` the bytes written: the buffer grows only
  // when full, so a member that inflates to nothing costs no allocation and
  // no zero-filling, whatever came before it.
  std::string out;
  std::size_t filled = 0;
  // One byte of room past the limit tells "exactly the limit" from "more".
  const std::size_t room = max_size + 1;
  // The last member's trailer says what it inflates to (a hint: it may
  // lie): a report is inflated into one buffer of its size, not doubled into
  // it with a copy at each step. A lie is held to what the input can inflate
  // to, so a few bytes sent never make the server zero-fill up to its limit.
  const std::size_t hinted =
      in.size() >= 18 ? std::min<std::size_t>(get_le32(in, in.size() - 4), in.size() * kMaxDeflateRatio) : 0;
  auto grow = [&] {
    std::size_t size = std::max<std::size_t>(out.size() * 2, std::size_t{64} * 1024);
    if (out.empty() && hinted > size) size = hinted + 1;
    size = std::min(room, size);
    if (on_grow) on_grow(size);
    out.resize(size);
  };
  std::size_t at = 0;
  for (std::size_t members = 1;; ++members) {
    if (members > max_members) throw GzipError("gzip: more than " + std::to_string(max_members) + " members");
    zlib::inflate_stream inflate;
    inflate.reset(kWindowBits);
    const std::size_t begin = filled;
    zlib::z_params params;
    const std::size_t data = skip_header(in, at);
    params.next_in = in.data() + data;
    params.avail_in = in.size() - data;
    boost::system::error_code ec;
    while (ec != zlib::error::end_of_stream) {
      if (filled == out.size()) {
        if (out.size() >= room)
          throw GzipTooLarge("gzip: decompresses to more than the limit of " + std::to_string(max_size) +
                             " bytes");
        grow();
      }
      params.next_out = out.data() + filled;
      params.avail_out = out.size() - filled;
      inflate.write(params, zlib::Flush::none, ec);
      filled = out.size() - params.avail_out;
      if (filled > max_size)
        throw GzipTooLarge("gzip: decompresses to more than the limit of " + std::to_string(max_size) +
                           " bytes");
      if (ec == zlib::error::need_buffers && params.avail_in == 0)
        throw GzipError("gzip: the data is cut short");
      if (ec && ec != zlib::error::end_of_stream && ec != zlib::error::need_buffers)
        throw GzipError("gzip: corrupt deflate data: " + ec.message());
    }
    // Beast's inflate may read whole bytes past the end of the deflate data
    // into its bit buffer and not give them back: `data_type` holds the bits
    // it holds (zlib's convention, bits 0-5), so the trailer starts that
    // many whole bytes before `next_in`.
    const auto unused_bytes = static_cast<std::size_t>(params.data_type & 63) / 8;
    at = static_cast<std::size_t>(static_cast<const char*>(params.next_in) - in.data()) - unused_bytes;
    if (at + 8 > in.size()) throw GzipError("gzip: the trailer is cut short");
    Crc32 crc;
    crc.update(std::string_view(out).substr(begin, filled - begin));
    if (get_le32(in, at) != crc.value()) throw GzipError("gzip: CRC mismatch (the data is corrupt)");
    if (get_le32(in, at + 4) != static_cast<std::uint32_t>(filled - begin))
      throw GzipError("gzip: length mismatch (the data is corrupt)");
    at += 8;
    if (at >= in.size()) break;
  }
  out.resize(filled);
  return out;
}

}  // namespace kw::http
