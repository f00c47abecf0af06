// The error of any JSON the project reads (a run report, an API body, a
// kernelwatch.json field): where it is and why, with a stable kind.
#pragma once

#include <stdexcept>
#include <string>

namespace kw::common {

// `path()` is the JSON path of the offending value (e.g.
// "cases[3].measurements[0].samples_ns[7]") and what() is "path: reason".
class ValidationError : public std::runtime_error {
 public:
  ValidationError(std::string path, const std::string& reason, std::string code = "invalid_value")
      : std::runtime_error((path.empty() ? std::string("report") : path) + ": " + reason),
        path_(std::move(path)),
        code_(std::move(code)) {}
  const std::string& path() const noexcept { return path_; }
  // The kind of error ("missing_field", "out_of_range", ...): stable, for clients.
  const std::string& code() const noexcept { return code_; }

 private:
  std::string path_;
  std::string code_;
};

}  // namespace kw::common
