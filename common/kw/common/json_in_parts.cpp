#include "kw/common/json_in_parts.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kw/common/in_parts.hpp"

namespace kw::common {

namespace {

using nlohmann::json;

constexpr std::size_t kSplitBytes = std::size_t{1} << 20;  // smaller documents are parsed whole
constexpr std::size_t kMinElements = 256;
constexpr std::size_t kElementsPerPart = 64;

// Where the text does not have the shape the scan expects; the whole-text
// parse then says what is wrong with it.
struct NotSplit {};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::size_t skip_space(std::size_t at) const {
    while (at < text_.size() &&
           (text_[at] == ' ' || text_[at] == '\n' || text_[at] == '\r' || text_[at] == '\t'))
      ++at;
    return at;
  }
  char at(std::size_t i) const {
    if (i >= text_.size()) throw NotSplit{};
    return text_[i];
  }
  // Past the string whose opening quote is at `at`.
  std::size_t skip_string(std::size_t at) const {
    std::size_t i = at + 1;
    while (true) {
      i = text_.find_first_of("\"\\", i);
      if (i == std::string_view::npos) throw NotSplit{};
      if (text_[i] == '"') return i + 1;
      i += 2;  // the escaped character
    }
  }
  // Past the value that starts at `at`.
  std::size_t skip_value(std::size_t at) const {
    const char first = this->at(at);
    if (first == '"') return skip_string(at);
    if (first != '{' && first != '[') {
      while (at < text_.size() && text_[at] != ',' && text_[at] != ']' && text_[at] != '}' &&
             text_[at] != ' ' && text_[at] != '\n' && text_[at] != '\r' && text_[at] != '\t')
        ++at;
      return at;
    }
    int depth = 0;
    for (std::size_t i = at; i < text_.size();) {
      const char c = text_[i];
      if (c == '"') {
        i = skip_string(i);
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      ++i;
    }
    throw NotSplit{};
  }

 private:
  std::string_view text_;
};

struct Split {
  std::string key;
  std::size_t value_begin = 0, value_end = 0;                 // the array, brackets included
  std::vector<std::pair<std::size_t, std::size_t>> elements;  // [begin, end) of each
};

// The top-level object's largest array and where its elements are.
std::optional<Split> split(std::string_view text) {
  const Scanner scan(text);
  std::vector<std::string_view> keys;
  Split largest;
  std::size_t i = scan.skip_space(0);
  if (scan.at(i) != '{') return std::nullopt;
  i = scan.skip_space(i + 1);
  while (scan.at(i) != '}') {
    if (scan.at(i) != '"') throw NotSplit{};
    const std::size_t key_end = scan.skip_string(i);
    const std::string_view key = text.substr(i + 1, key_end - i - 2);
    // Two spellings of one key would hide which one the parser keeps.
    if (key.find('\\') != std::string_view::npos) throw NotSplit{};
    keys.push_back(key);
    i = scan.skip_space(key_end);
    if (scan.at(i) != ':') throw NotSplit{};
    const std::size_t value_begin = scan.skip_space(i + 1);
    const std::size_t value_end = scan.skip_value(value_begin);
    if (text[value_begin] == '[' && value_end - value_begin > largest.value_end - largest.value_begin) {
      largest.key = std::string(key);
      largest.value_begin = value_begin;
      largest.value_end = value_end;
    }
    i = scan.skip_space(value_end);
    if (scan.at(i) == ',') {
      i = scan.skip_space(i + 1);
    } else if (scan.at(i) != '}') {
      throw NotSplit{};
    }
  }
  if (largest.value_end == 0) return std::nullopt;  // no array
  if (std::count(keys.begin(), keys.end(), largest.key) != 1) throw NotSplit{};
  i = scan.skip_space(largest.value_begin + 1);
  if (scan.at(i) == ']') return std::nullopt;
  while (true) {
    const std::size_t end = scan.skip_value(i);
    largest.elements.emplace_back(i, end);
    i = scan.skip_space(end);
    if (scan.at(i) == ']') break;
    if (scan.at(i) != ',') throw NotSplit{};
    i = scan.skip_space(i + 1);
  }
  if (i + 1 != largest.value_end || largest.elements.size() < kMinElements) return std::nullopt;
  return largest;
}

}  // namespace

json parse_in_parts(std::string_view text) {
  if (text.size() >= kSplitBytes) {
    try {
      if (std::optional<Split> found = split(text)) {
        auto parts =
            in_parts(found->elements.size(), kElementsPerPart, [&](std::size_t begin, std::size_t end) {
              std::vector<json> parsed;
              parsed.reserve(end - begin);
              for (std::size_t k = begin; k < end; ++k) {
                const auto [first, last] = found->elements[k];
                parsed.push_back(json::parse(text.begin() + static_cast<std::ptrdiff_t>(first),
                                             text.begin() + static_cast<std::ptrdiff_t>(last)));
              }
              return parsed;
            });
        std::string rest;
        rest.reserve(text.size() - (found->value_end - found->value_begin) + 2);
        rest.append(text.substr(0, found->value_begin)).append("[]").append(text.substr(found->value_end));
        json document = json::parse(rest);
        json::array_t& elements = document.at(found->key).get_ref<json::array_t&>();
        elements.reserve(found->elements.size());
        for (std::vector<json>& part : parts) {
          for (json& element : part) elements.push_back(std::move(element));
        }
        return document;
      }
    } catch (const NotSplit&) {
    } catch (const json::exception&) {
    }
  }
  return json::parse(text);
}

}  // namespace kw::common
