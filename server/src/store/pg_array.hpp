// PostgreSQL array literals ("{1.5,NULL,\"text\"}") built element by
// element: bulk rows go to the server as parallel arrays through unnest(),
// one round trip, parsed by PostgreSQL's own fast array input.
#pragma once

#include <charconv>
#include <optional>
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

}  // namespace kw::server
