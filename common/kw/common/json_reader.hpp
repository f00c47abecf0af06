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

#include "kw/common/run_report.hpp"

namespace kw::common {

using json = nlohmann::json;

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
    if (!value_.is_object()) fail(path_, "must be an object, got " + type_name(value_));
  }

  [[noreturn]] static void fail(const std::string& path, const std::string& reason) {
    throw ValidationError(path, reason);
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
    if (value == nullptr) fail(child(key), "is required");
    return *value;
  }

  std::string string(std::string_view key, bool allow_empty = false) {
    return as_string(require(key), child(key), allow_empty);
  }
  std::optional<std::string> opt_string(std::string_view key) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_string(*value, child(key), true);
  }
  std::string string_or_empty(std::string_view key) { return opt_string(key).value_or(""); }

  double number(std::string_view key, double min) { return as_number(require(key), child(key), min); }
  std::optional<double> opt_number(std::string_view key, double min) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_number(*value, child(key), min);
  }

  std::int64_t integer(std::string_view key, std::int64_t min) {
    return as_integer(require(key), child(key), min);
  }
  std::optional<std::int64_t> opt_integer(std::string_view key, std::int64_t min) {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    return as_integer(*value, child(key), min);
  }

  bool boolean(std::string_view key) {
    const json& value = require(key);
    if (!value.is_boolean()) fail(child(key), "must be a boolean, got " + type_name(value));
    return value.get<bool>();
  }

  const json& array(std::string_view key) {
    const json& value = require(key);
    if (!value.is_array()) fail(child(key), "must be an array, got " + type_name(value));
    return value;
  }
  const json* opt_array(std::string_view key) {
    const json* value = find(key);
    if (value != nullptr && !value->is_array())
      fail(child(key), "must be an array, got " + type_name(*value));
    return value;
  }

  void reject_unknown_keys() const {
    for (const auto& [key, _] : value_.items()) {
      if (!seen_.contains(key)) fail(child(key), "unknown field");
    }
  }

  static std::string as_string(const json& value, const std::string& path, bool allow_empty) {
    if (!value.is_string()) fail(path, "must be a string, got " + type_name(value));
    std::string text = value.get<std::string>();
    if (!allow_empty && text.empty()) fail(path, "must not be empty");
    return text;
  }

  static double as_number(const json& value, const std::string& path, double min) {
    if (!value.is_number()) fail(path, "must be a number, got " + type_name(value));
    double number = value.get<double>();
    if (!std::isfinite(number)) fail(path, "must be finite");
    if (number < min) {
      fail(path, min == 0 ? "must not be negative" : "must be >= " + json(min).dump());
    }
    return number;
  }

  static std::int64_t as_integer(const json& value, const std::string& path, std::int64_t min) {
    if (value.is_number_float()) {
      double number = value.get<double>();
      if (!std::isfinite(number) || std::trunc(number) != number)
        fail(path, "must be an integer, got " + value.dump());
    } else if (!value.is_number()) {
      fail(path, "must be an integer, got " + type_name(value));
    }
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      fail(path, "is out of range");
    auto integer = value.get<std::int64_t>();
    if (integer < min) {
      fail(path, min == 0 ? "must not be negative" : "must be >= " + std::to_string(min));
    }
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
