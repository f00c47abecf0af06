// What a service call refuses with, for tests of the services' rules.
#pragma once

#include <functional>
#include <string>

#include "errors.hpp"

namespace kw::server::testing {

// The code of the HttpError `action` throws ("" when it throws none); its
// message into `message` where one is given.
inline std::string error_of(const std::function<void()>& action, std::string* message = nullptr) {
  try {
    action();
  } catch (const HttpError& error) {
    if (message) *message = error.what();
    return error.code();
  }
  return "";
}

}  // namespace kw::server::testing
