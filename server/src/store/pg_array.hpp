// Arrays built element by element: bulk rows go to the server as parallel
// arrays through unnest(), one round trip. Small ones as literals
// ("{1.5,NULL,\"text\"}"); a run's bulk in PostgreSQL's binary array form,
// which it reads without parsing a number (a 10,000-case run's samples took
// 300 ms to parse as text).
#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <pqxx/binarystring>

namespace kw::server {

class PgArray {
 public:
  void text(std::string_view value) {
    next();
    out_.push_back('"');
    for (char c : value) {
      if (c == '"' || c == '\\') out_.push_back('\\');
      out_.push_back(c);
    }
    out_.push_back('"');
  }
  template <typename Number>
  void number(Number value) {
    next();
    char buffer[32];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, end);
  }
  void null() {
    next();
    out_ += "NULL";
  }
  std::string str() const { return out_ + "}"; }

 private:
  void next() {
    if (out_.size() > 1) out_.push_back(',');
  }
  std::string out_ = "{";
};

// The element types of binary arrays, by their type OIDs (pg_type.dat).
enum class PgType : std::uint32_t {
  boolean = 16,
  int2 = 21,
  int4 = 23,
  int8 = 20,
  float4 = 700,
  float8 = 701,
  text = 25,
  json_text = 114,  // PostgreSQL's `json`: its text, checked and kept as it came
  jsonb = 3802,
};

namespace pg_binary {

template <typename Unsigned>
void put(std::string& out, Unsigned value) {
  static_assert(std::is_unsigned_v<Unsigned>);
  for (int shift = 8 * (sizeof(Unsigned) - 1); shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((value >> shift) & 0xff));
}

template <typename Unsigned>
Unsigned get(const unsigned char*& at) {
  Unsigned value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) value = static_cast<Unsigned>((value << 8) | *at++);
  return value;
}

}  // namespace pg_binary

// A one-dimensional array of `Type` as array_recv reads it: dimensions, a
// null flag, the element OID, then each element as its length and its
// big-endian bytes. The statement casts the parameter to the array type
// (`$1::real[]`), which is the type PostgreSQL expects; a wrong element
// type is refused by name, never misread.
template <PgType Type>
class PgBinaryArray {
 public:
  template <typename Value>
  void add(const Value& value) {
    ++count_;
    if constexpr (Type == PgType::text || Type == PgType::json_text || Type == PgType::jsonb) {
      const std::string_view text(value);
      const bool jsonb = Type == PgType::jsonb;
      pg_binary::put(elements_, static_cast<std::uint32_t>(text.size() + (jsonb ? 1 : 0)));
      if (jsonb) elements_.push_back(1);  // jsonb's binary form: version 1, then its text
      elements_.append(text);
    } else if constexpr (Type == PgType::boolean) {
      pg_binary::put(elements_, std::uint32_t{1});
      elements_.push_back(static_cast<bool>(value) ? 1 : 0);
    } else if constexpr (Type == PgType::float4) {
      pg_binary::put(elements_, std::uint32_t{4});
      pg_binary::put(elements_, std::bit_cast<std::uint32_t>(static_cast<float>(value)));
    } else if constexpr (Type == PgType::float8) {
      pg_binary::put(elements_, std::uint32_t{8});
      pg_binary::put(elements_, std::bit_cast<std::uint64_t>(static_cast<double>(value)));
    } else if constexpr (Type == PgType::int2) {
      pg_binary::put(elements_, std::uint32_t{2});
      pg_binary::put(elements_, static_cast<std::uint16_t>(static_cast<std::int16_t>(value)));
    } else if constexpr (Type == PgType::int4) {
      pg_binary::put(elements_, std::uint32_t{4});
      pg_binary::put(elements_, static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
    } else {
      pg_binary::put(elements_, std::uint32_t{8});
      pg_binary::put(elements_, static_cast<std::uint64_t>(static_cast<std::int64_t>(value)));
    }
  }
  void null() {
    ++count_;
    has_null_ = true;
    pg_binary::put(elements_, ~std::uint32_t{0});  // length -1
  }

  pqxx::binarystring param() const {
    std::string out;
    out.reserve(20 + elements_.size());
    pg_binary::put(out, std::uint32_t{count_ > 0 ? 1U : 0U});  // dimensions
    pg_binary::put(out, std::uint32_t{has_null_ ? 1U : 0U});
    pg_binary::put(out, static_cast<std::uint32_t>(Type));
    if (count_ > 0) {
      pg_binary::put(out, static_cast<std::uint32_t>(count_));
      pg_binary::put(out, std::uint32_t{1});  // lower bound
    }
    out += elements_;
    return pqxx::binarystring(out);
  }

 private:
  std::string elements_;
  std::size_t count_ = 0;
  bool has_null_ = false;
};

// A one-dimensional numeric array as array_send wrote it, in bytea's hex
// text ("\\x0000..."): read back without formatting or parsing a number.
template <typename T>
std::vector<T> parse_pg_binary_array(std::string_view hex) {
  auto fail = [&](const char* what) {
    return std::runtime_error(std::string("unexpected binary array from PostgreSQL: ") + what);
  };
  if (hex.size() < 2 || hex[0] != '\\' || hex[1] != 'x' || hex.size() % 2 != 0) throw fail("not bytea hex");
  std::vector<unsigned char> bytes(hex.size() / 2 - 1);
  auto nibble = [&](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw fail("not bytea hex");
  };
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(nibble(hex[2 + 2 * i]) << 4 | nibble(hex[3 + 2 * i]));
  const unsigned char* at = bytes.data();
  const unsigned char* end = at + bytes.size();
  auto need = [&](std::size_t n) {
    if (static_cast<std::size_t>(end - at) < n) throw fail("truncated");
  };
  need(12);
  const auto dimensions = pg_binary::get<std::uint32_t>(at);
  pg_binary::get<std::uint32_t>(at);  // the null flag: a null element is refused below
  const auto type = pg_binary::get<std::uint32_t>(at);
  std::vector<T> values;
  if (dimensions == 0) return values;
  if (dimensions != 1) throw fail("more than one dimension");
  need(8);
  const auto count = pg_binary::get<std::uint32_t>(at);
  pg_binary::get<std::uint32_t>(at);  // lower bound
  values.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    need(4);
    const auto length = pg_binary::get<std::uint32_t>(at);
    need(length);
    if (type == static_cast<std::uint32_t>(PgType::float4) && length == 4) {
      values.push_back(static_cast<T>(std::bit_cast<float>(pg_binary::get<std::uint32_t>(at))));
    } else if (type == static_cast<std::uint32_t>(PgType::float8) && length == 8) {
      values.push_back(static_cast<T>(std::bit_cast<double>(pg_binary::get<std::uint64_t>(at))));
    } else if (type == static_cast<std::uint32_t>(PgType::int2) && length == 2) {
      values.push_back(static_cast<T>(static_cast<std::int16_t>(pg_binary::get<std::uint16_t>(at))));
    } else if (type == static_cast<std::uint32_t>(PgType::int4) && length == 4) {
      values.push_back(static_cast<T>(static_cast<std::int32_t>(pg_binary::get<std::uint32_t>(at))));
    } else if (type == static_cast<std::uint32_t>(PgType::int8) && length == 8) {
      values.push_back(static_cast<T>(static_cast<std::int64_t>(pg_binary::get<std::uint64_t>(at))));
    } else {
      throw fail("an element that is null or not a number");
    }
  }
  if (at != end) throw fail("bytes after the last element");
  return values;
}

// A text[] parameter of `values`; nullopt (SQL NULL) for nullopt.
inline std::optional<std::string> text_array(const std::optional<std::vector<std::string>>& values) {
  if (!values) return std::nullopt;
  PgArray array;
  for (const std::string& value : *values) array.text(value);
  return array.str();
}

// A number in PostgreSQL's text form, "3e+06" (libpqxx 6 parses doubles
// through a stream, several times slower, and history reads thousands).
template <typename T>
T parse_pg_number(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [next, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || next != end)
    throw std::runtime_error("unexpected number from PostgreSQL: " + std::string(text.substr(0, 40)));
  return value;
}

// PostgreSQL's text form of a numeric array, "{1.5,2,3e+06}".
template <typename T>
std::vector<T> parse_pg_array(std::string_view text) {
  std::vector<T> values;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') {
    throw std::runtime_error("unexpected array text from PostgreSQL: " + std::string(text.substr(0, 40)));
  }
  const char* p = text.data() + 1;
  const char* end = text.data() + text.size() - 1;
  while (p < end) {
    T value{};
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc()) throw std::runtime_error("bad number in array text from PostgreSQL");
    values.push_back(value);
    p = next < end && *next == ',' ? next + 1 : next;
  }
  return values;
}

}  // namespace kw::server
