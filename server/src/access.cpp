#include "access.hpp"

#include <algorithm>

#include "errors.hpp"

namespace kw::server {

std::string_view to_string(Scope scope) {
  switch (scope) {
    case Scope::read:
      return "read";
    case Scope::agent:
      return "agent";
    case Scope::ci:
      return "ci";
    case Scope::admin:
      return "admin";
  }
  return "read";
}

std::optional<Scope> scope_from(std::string_view text) {
  for (Scope scope : {Scope::read, Scope::agent, Scope::ci, Scope::admin}) {
    if (to_string(scope) == text) return scope;
  }
  return std::nullopt;
}

bool Caller::may_access(std::string_view project) const {
  return !projects || std::find(projects->begin(), projects->end(), project) != projects->end();
}

void Caller::require_project(std::string_view project) const {
  if (may_access(project)) return;
  throw Forbidden("project_denied",
                  "token \"" + token_name + "\" is not scoped to project \"" + std::string(project) + "\"");
}

void require_access(const Caller* caller, std::string_view project) {
  if (caller) caller->require_project(project);
}

}  // namespace kw::server
