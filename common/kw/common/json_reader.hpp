// Reads a JSON object field by field with the path of every value, so each
// error names the field ("cases[3].measurements[0].samples_ns[7]: ...").
// Keys never read are rejected as unknown (typos such as "sample_ns").
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kw/common/validation_error.hpp"

namespace kw::common {

using json = nlohmann::json;

// Input limits (docs/run-report.md): what the store can index and what a
// report can sensibly hold.
constexpr std::size_t kMaxNameBytes = 200;  // names that are keys: project, branch, case, impl, ...
constexpr std::size_t kMaxTextBytes =
    std::size_t{64} * 1024;                     // any other string: messages, log tails, kernel names
constexpr std::int64_t kMaxInt32 = 2147483647;  // integers the store keeps as 32-bit
constexpr std::int64_t kMaxInt16 = 32767;       // and as 16-bit (a sample's replicate index)
// One side's ncu CSV in a profile (POST /api/v1/jobs/ID/profile).
constexpr std::size_t kMaxProfileCsvBytes = std::size_t{4} * 1024 * 1024;

inline std::string type_name(const json& value) {
  if (value.is_number_integer() || value.is_number_unsigned()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

// One JSON object being read, with the path that names it in error messages.
// Every accessor records the key it consumed so unknown keys (usually typos,
// "sample_ns") can be rejected at the end.
class JsonReader {
 public:
  JsonReader(const json& value, std::string path) : value_(value), path_(std::move(path)) {
    if (!value_.is_object()) fail(path_, "must be an object, got " + type_name(value_), "wrong_type");
  }

  // `code` is the kind of error, stable for clients (docs/api.md lists them).
  [[noreturn]] static void fail(const std::string& path, const std::string& reason,
                                std::string code = "invalid_value") {
    throw ValidationError(path, reason, std::move(code));
  }

  std::string child(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const std::string& path() const { return path_; }

  const json* find(std::string_view key) {
    seen_.emplace(key);
    auto it = value_.find(std::string(key));
    if (it == value_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& require(std::string_view key) {
    const json* value = find(key);
    if (value == nullptr) fail(child(key), "is required", "missing_field");
    return *value;
  }

  std::string string(std::string_view key, bool allow_empty = false, std::size_t max_bytes = kMaxTextBytes) {
    return as_string(require(key), child(key), allow_empty, max_bytes);
  }
  // A name that is a key of the store: at most kMaxNameBytes.
  std::string name(std::string_view key) { return string(key, false, kMaxNameBytes); }
  std::optional<std::string> opt_string(std::string_view key, std::size_t max_bytes = kMaxTextBytes) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_string(*value, child(key), true, max_bytes);
  }
  std::string string_or_empty(std::string_view key, std::size_t max_bytes = kMaxTextBytes) {
    return opt_string(key, max_bytes).value_or("");
  }

  double number(std::string_view key, double min) { return as_number(require(key), child(key), min); }
  std::optional<double> opt_number(std::string_view key, double min) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_number(*value, child(key), min);
  }

  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max = INT64_MAX) {
    return as_integer(require(key), child(key), min, max);
  }
  std::optional<std::int64_t> opt_integer(std::string_view key, std::int64_t min,
                                          std::int64_t max = INT64_MAX) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_integer(*value, child(key), min, max);
  }

  bool boolean(std::string_view key) {
    const json& value = require(key);
    if (!value.is_boolean()) fail(child(key), "must be a boolean, got " + type_name(value), "wrong_type");
    return value.get<bool>();
  }

  const json& array(std::string_view key) {
    const json& value = require(key);
    if (!value.is_array()) fail(child(key), "must be an array, got " + type_name(value), "wrong_type");
    return value;
  }
  const json* opt_array(std::string_view key) {
    const json* value = find(key);
    if (value != nullptr && !value->is_array())
      fail(child(key), "must be an array, got " + type_name(*value), "wrong_type");
    return value;
  }

  void reject_unknown_keys() const {
    for (const auto& [key, _] : value_.items()) {
      if (!seen_.contains(key)) fail(child(key), "unknown field", "unknown_field");
    }
  }

  static std::string as_string(const json& value, const std::string& path, bool allow_empty,
                               std::size_t max_bytes = kMaxTextBytes) {
    if (!value.is_string()) fail(path, "must be a string, got " + type_name(value), "wrong_type");
    const std::string& text = value.get_ref<const std::string&>();
    if (!allow_empty && text.empty()) fail(path, "must not be empty", "empty");
    if (text.size() > max_bytes)
      fail(path, "is longer than " + std::to_string(max_bytes) + " bytes", "too_long");
    if (text.find('\0') != std::string::npos)
      fail(path, "contains a NUL character (\\u0000)", "nul_character");
    return text;
  }

  static double as_number(const json& value, const std::string& path, double min) {
    if (!value.is_number()) fail(path, "must be a number, got " + type_name(value), "wrong_type");
    double number = value.get<double>();
    if (!std::isfinite(number)) fail(path, "must be finite", "out_of_range");
    if (number != 0 && !std::isnormal(number))
      fail(path, "is too close to 0 to store, got " + value.dump(), "out_of_range");
    if (number < min) {
      fail(path, min == 0 ? "must not be negative" : "must be >= " + json(min).dump(), "out_of_range");
    }
    return number;
  }

  static std::int64_t as_integer(const json& value, const std::string& path, std::int64_t min,
                                 std::int64_t max = INT64_MAX) {
    if (value.is_number_float()) {
      double number = value.get<double>();
      if (!std::isfinite(number) || std::trunc(number) != number)
        fail(path, "must be an integer, got " + value.dump(), "not_an_integer");
    } else if (!value.is_number()) {
      fail(path, "must be an integer, got " + type_name(value), "not_an_integer");
    }
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(path, "is out of range", "out_of_range");
    if (value.is_number_float() && std::abs(value.get<double>()) >= 9.2e18)
      fail(path, "is out of range", "out_of_range");
    auto integer = value.get<std::int64_t>();
    if (integer < min) {
      fail(path, min == 0 ? "must not be negative" : "must be >= " + std::to_string(min), "out_of_range");
    }
    if (integer > max)
      fail(path, "must be <= " + std::to_string(max) + ", got " + std::to_string(integer), "out_of_range");
    return integer;
  }

 private:
  const json& value_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
};

inline std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

}  // namespace kw::common
