// One exception per HTTP status. Handlers and repositories throw these; the
// router turns them into {"error": code, "message": text[, "field": path]} at
// a single place. `code` names the kind of error and is stable: clients branch
// on it (docs/api.md lists every code); the message is for people.
#pragma once

#include <stdexcept>
#include <string>

namespace kw::server {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string code, const std::string& message, std::string field = {})
      : std::runtime_error(message), status_(status), code_(std::move(code)), field_(std::move(field)) {}
  int status() const noexcept { return status_; }
  const std::string& code() const noexcept { return code_; }
  // The JSON path of the offending value, for 422; empty otherwise.
  const std::string& field() const noexcept { return field_; }

 private:
  int status_;
  std::string code_;
  std::string field_;
};

template <int Status>
struct HttpStatusError : HttpError {
  HttpStatusError(std::string code, const std::string& message)
      : HttpError(Status, std::move(code), message) {}
};

using BadRequest = HttpStatusError<400>;
using Unauthorized = HttpStatusError<401>;
using Forbidden = HttpStatusError<403>;
using NotFound = HttpStatusError<404>;
using MethodNotAllowed = HttpStatusError<405>;
using Conflict = HttpStatusError<409>;
using PayloadTooLarge = HttpStatusError<413>;
using TooManyRequests = HttpStatusError<429>;
using ServiceUnavailable = HttpStatusError<503>;
using InsufficientStorage = HttpStatusError<507>;

// Well-formed JSON that breaks the contract; the message is "field: reason".
struct Unprocessable : HttpError {
  Unprocessable(std::string code, const std::string& field, const std::string& reason)
      : HttpError(422, std::move(code), field + ": " + reason, field) {}
};

}  // namespace kw::server
