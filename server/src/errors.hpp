// One exception per HTTP status. Handlers and repositories throw these; the
// router turns them into {"error": code, "message": text} at a single place.
#pragma once

#include <stdexcept>
#include <string>

namespace kw::server {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string code, const std::string& message)
      : std::runtime_error(message), status_(status), code_(std::move(code)) {}
  int status() const noexcept { return status_; }
  const std::string& code() const noexcept { return code_; }

 private:
  int status_;
  std::string code_;
};

struct BadRequest : HttpError {
  explicit BadRequest(const std::string& message) : HttpError(400, "bad_request", message) {}
};
struct Unauthorized : HttpError {
  explicit Unauthorized(const std::string& message) : HttpError(401, "unauthorized", message) {}
};
struct Forbidden : HttpError {
  explicit Forbidden(const std::string& message) : HttpError(403, "forbidden", message) {}
};
struct NotFound : HttpError {
  explicit NotFound(const std::string& message) : HttpError(404, "not_found", message) {}
};
struct MethodNotAllowed : HttpError {
  explicit MethodNotAllowed(const std::string& message) : HttpError(405, "method_not_allowed", message) {}
};
struct Conflict : HttpError {
  explicit Conflict(const std::string& message) : HttpError(409, "conflict", message) {}
};
struct PayloadTooLarge : HttpError {
  explicit PayloadTooLarge(const std::string& message) : HttpError(413, "payload_too_large", message) {}
};
// Well-formed JSON that breaks the contract (names the field).
struct Unprocessable : HttpError {
  explicit Unprocessable(const std::string& message) : HttpError(422, "invalid_report", message) {}
};
struct ServiceUnavailable : HttpError {
  explicit ServiceUnavailable(const std::string& message) : HttpError(503, "unavailable", message) {}
};

}  // namespace kw::server
