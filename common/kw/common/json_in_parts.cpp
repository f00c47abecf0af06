#include "kw/common/json_in_parts.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kw/common/in_parts.hpp"

namespace kw::common {

namespace {

using nlohmann::json;

constexpr std::size_t kSplitBytes = std::size_t{1} << 20;  // smaller documents are parsed whole
constexpr std::size_t kMinElements = 256;
constexpr std::size_t kElementsPerPart = 64;
// Elements smaller than this on average are parsed whole: their index (16
// bytes each) would cost more than parsing them apart saves, and a body of
// 20 million `{}` would need a 320 MB index before its first is parsed.
constexpr std::size_t kMinElementBytes = 256;

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

bool starts_value(char c) {
  return c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' ||
         c == 'n';
}

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
  const std::size_t most_elements = text.size() / kMinElementBytes;
  while (true) {
    // A part parsed alone would skip a byte-order mark or other bytes the
    // whole document may not hold there.
    if (!starts_value(scan.at(i)) || largest.elements.size() >= most_elements) throw NotSplit{};
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

// The bytes a parsed value holds, as libstdc++ and glibc lay out what
// nlohmann makes: each allocation is a chunk of its size plus 8 bytes,
// rounded up to 16 (32 at least). Measured against the peak RSS of parsing:
// a run report holds about 4 times its text, empty objects 37 times.
namespace cost {
constexpr std::size_t chunk(std::size_t bytes) {
  return std::max<std::size_t>(32, (bytes + 8 + 15) & ~std::size_t{15});
}
constexpr std::size_t kJson = 16;                     // a value in its array's buffer
constexpr std::size_t kObject = chunk(48);            // the std::map an object points to
constexpr std::size_t kArray = chunk(24);             // the std::vector an array points to
constexpr std::size_t kString = chunk(32);            // the std::string a string value points to
constexpr std::size_t kMember = chunk(32 + 32 + 16);  // a map node: its links, key and value
constexpr std::size_t heap(std::size_t length) {
  return length > 15 ? chunk(length + 1) : 0;
}
constexpr std::size_t kMapped = std::size_t{128} * 1024;  // glibc's mmap threshold
}  // namespace cost

// Shared by the parts of one document.
class Tally {
 public:
  explicit Tally(const JsonLimits& limits) : limits_(limits) {}
  void add(std::size_t bytes) {
    const std::size_t total = total_.fetch_add(bytes) + bytes;
    if (total > limits_.max_memory)
      throw JsonTooLarge("the JSON value needs more than " + std::to_string(limits_.max_memory) +
                         " bytes of memory");
    if (limits_.lease != nullptr) {
      limits_.lease->take(bytes);
      taken_ += bytes;
    }
  }
  // The document was dropped (to be parsed again, whole).
  void reset() {
    if (limits_.lease != nullptr) limits_.lease->give(taken_.exchange(0));
    total_ = 0;
  }
  const JsonLimits& limits() const { return limits_; }

 private:
  const JsonLimits& limits_;
  std::atomic<std::size_t> total_{0};
  std::atomic<std::size_t> taken_{0};
};

// nlohmann's own DOM builder, with each event counted against the limits.
class BudgetedDom {
 public:
  using Dom = nlohmann::detail::json_sax_dom_parser<json>;
  BudgetedDom(json& root, Tally& tally, int depth) : dom_(root), tally_(tally), base_depth_(depth) {}
  BudgetedDom(const BudgetedDom&) = delete;
  BudgetedDom& operator=(const BudgetedDom&) = delete;
  ~BudgetedDom() = default;

  bool null() {
    place(0);
    return dom_.null();
  }
  bool boolean(bool value) {
    place(0);
    return dom_.boolean(value);
  }
  bool number_integer(json::number_integer_t value) {
    place(0);
    return dom_.number_integer(value);
  }
  bool number_unsigned(json::number_unsigned_t value) {
    place(0);
    return dom_.number_unsigned(value);
  }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    place(0);
    return dom_.number_float(value, text);
  }
  bool string(json::string_t& value) {
    place(cost::kString + cost::heap(value.size()));
    return dom_.string(value);
  }
  bool binary(json::binary_t& value) {
    place(cost::chunk(value.size()));
    return dom_.binary(value);
  }
  bool start_object(std::size_t size) {
    place(cost::kObject);
    open(false);
    return dom_.start_object(size);
  }
  bool key(json::string_t& value) {
    count(cost::kMember + cost::heap(value.size()));
    return dom_.key(value);
  }
  bool end_object() {
    open_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t size) {
    place(cost::kArray);
    open(true);
    return dom_.start_array(size);
  }
  bool end_array() {
    open_.pop_back();
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& error) {
    return dom_.parse_error(position, last_token, error);
  }
  void flush() {
    tally_.add(pending_);
    pending_ = 0;
  }

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{256} * 1024;
  struct Open {
    bool array = false;
    std::size_t size = 0, capacity = 0;  // an array's elements and its buffer's room (doubling)
  };

  void open(bool array) {
    if (static_cast<int>(open_.size()) + base_depth_ >= tally_.limits().max_depth)
      throw JsonTooDeep("the JSON value is nested deeper than " + std::to_string(tally_.limits().max_depth) +
                        " levels");
    open_.push_back({array, 0, 0});
  }
  // A value of `bytes` of its own enters its container: an object's member
  // was counted with its key; an array's buffer doubles when full.
  void place(std::size_t bytes) {
    if (!open_.empty() && open_.back().array) {
      Open& array = open_.back();
      if (++array.size > array.capacity) {
        const std::size_t grown = std::max<std::size_t>(1, array.capacity * 2);
        bytes += cost::kJson * (grown - array.capacity);
        // A buffer this large is mapped apart and given back when it moves:
        // the old one and the new one are held at once, at the peak.
        if (cost::kJson * array.capacity >= cost::kMapped) bytes += cost::kJson * array.capacity;
        array.capacity = grown;
      }
    }
    count(bytes);
  }
  void count(std::size_t bytes) {
    pending_ += bytes;
    if (pending_ >= kFlushBytes) flush();
  }

  Dom dom_;
  Tally& tally_;
  int base_depth_;
  std::vector<Open> open_;
  std::size_t pending_ = 0;
};

// Reads the whole text as the parser does and throws its first error (of
// the parser's own type), building nothing: the parts' documents may still
// hold their memory.
class FaultFinder {
 public:
  explicit FaultFinder(int max_depth) : max_depth_(max_depth) {}
  bool null() { return true; }
  bool boolean(bool /*value*/) { return true; }
  bool number_integer(json::number_integer_t /*value*/) { return true; }
  bool number_unsigned(json::number_unsigned_t /*value*/) { return true; }
  bool number_float(json::number_float_t /*value*/, const json::string_t& /*text*/) { return true; }
  bool string(json::string_t& /*value*/) { return true; }
  bool binary(json::binary_t& /*value*/) { return true; }
  bool start_object(std::size_t /*size*/) { return enter(); }
  bool key(json::string_t& /*value*/) { return true; }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*size*/) { return enter(); }
  bool end_array() {
    --depth_;
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const Exception& error) {
    throw error;
  }

 private:
  bool enter() {
    if (++depth_ > max_depth_)
      throw JsonTooDeep("the JSON value is nested deeper than " + std::to_string(max_depth_) + " levels");
    return true;
  }
  int max_depth_;
  int depth_ = 0;
};

void first_fault(std::string_view text, int max_depth) {
  FaultFinder finder(max_depth);
  json::sax_parse(text.begin(), text.end(), &finder);
}

json parse_budgeted(std::string_view text, Tally& tally, int depth) {
  json value;
  BudgetedDom dom(value, tally, depth);
  json::sax_parse(text.begin(), text.end(), &dom);
  dom.flush();
  return value;
}

}  // namespace

json parse_in_parts(std::string_view text, const JsonLimits& limits) {
  Tally tally(limits);
  if (text.size() >= kSplitBytes) {
    try {
      if (std::optional<Split> found = split(text)) {
        auto parts =
            in_parts(found->elements.size(), kElementsPerPart, [&](std::size_t begin, std::size_t end) {
              std::vector<json> parsed;
              parsed.reserve(end - begin);
              for (std::size_t k = begin; k < end; ++k) {
                const auto [first, last] = found->elements[k];
                // Inside the top-level object and its array.
                parsed.push_back(parse_budgeted(text.substr(first, last - first), tally, 2));
              }
              return parsed;
            });
        // The parts' buffers and the array they are moved into, and as much
        // again that parsing them on several threads leaves between chunks
        // (measured: 112 bytes held per `{}` element against 96 counted).
        tally.add(3 * cost::kJson * found->elements.size());
        std::string rest;
        rest.reserve(text.size() - (found->value_end - found->value_begin) + 2);
        rest.append(text.substr(0, found->value_begin)).append("[]").append(text.substr(found->value_end));
        json document = parse_budgeted(rest, tally, 0);
        json::array_t& elements = document.at(found->key).get_ref<json::array_t&>();
        elements.reserve(found->elements.size());
        for (std::vector<json>& part : parts) {
          for (json& element : part) elements.push_back(std::move(element));
        }
        return document;
      }
    } catch (const NotSplit&) {
    } catch (const json::exception&) {
      // A part is broken: the document's first fault, as the whole parser
      // names it, found without building the document a second time.
      tally.reset();
      first_fault(text, limits.max_depth);
    }
    // Whatever was parsed is gone: the whole parse starts from nothing.
    tally.reset();
  }
  return parse_budgeted(text, tally, 0);
}

}  // namespace kw::common
