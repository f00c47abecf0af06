// Who a request comes from and what it may touch: the token's scope and the
// projects it names. Shared by the HTTP layer (checks) and the store (tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kw::server {

enum class Scope { read, agent, ci, admin };

std::string_view to_string(Scope scope);
std::optional<Scope> scope_from(std::string_view text);

// Who sent the request, as established from the bearer token.
struct Caller {
  std::int64_t token_id = 0;
  std::string token_name;
  Scope scope = Scope::read;
  // The projects this token may write, acknowledge or read; nullopt: all.
  std::optional<std::vector<std::string>> projects;

  bool may_access(std::string_view project) const;
  // Throws Forbidden ("project_denied") when the token does not name `project`.
  void require_project(std::string_view project) const;
};

// `caller` null: a read where reads are open, which may read any project.
// Otherwise as Caller::require_project.
void require_access(const Caller* caller, std::string_view project);

}  // namespace kw::server
