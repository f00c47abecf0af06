// API tokens, as an admin makes, lists and revokes them over HTTP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "service/project_store.hpp"

namespace kw::server {

class TokenService {
 public:
  explicit TokenService(ProjectStore& store) : store_(store) {}

  // The token made, its secret in `token` (shown once). Forbidden when a
  // project-scoped admin asks for projects beyond its own; none asked: its own.
  nlohmann::json create(const Caller& admin, const std::string& name, Scope scope,
                        std::optional<std::vector<std::string>> projects);
  // The tokens the admin manages.
  nlohmann::json list(const Caller& admin);
  // NotFound ("no_such_token") for none active, or one the admin does not manage.
  void revoke(const Caller& admin, std::int64_t token_id);

 private:
  ProjectStore& store_;
};

}  // namespace kw::server
