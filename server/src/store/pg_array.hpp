// PostgreSQL array literals ("{1.5,NULL,\"text\"}") built element by
// element: bulk rows go to the server as parallel arrays through unnest(),
// one round trip, parsed by PostgreSQL's own fast array input.
#pragma once

#include <charconv>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
