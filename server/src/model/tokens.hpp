// An API token as it is kept: never its secret.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "access.hpp"

namespace kw::server {

struct TokenInfo {
  std::int64_t id = 0;
  std::string name;
  Scope scope = Scope::read;
  std::string created_at;
  std::string last_used_at;
  std::string revoked_at;
  std::optional<std::vector<std::string>> projects;  // nullopt: every project
};

}  // namespace kw::server
