// API tokens: random secrets handed out once, stored only as SHA-256 hashes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "access.hpp"
#include "model/tokens.hpp"
#include "store/database.hpp"

namespace kw::server {

class TokenRepository {
 public:
  static std::vector<Statement> statements();

  // Returns the new token's secret; only its hash is stored. A token scoped
  // to `projects` (nullopt: all) creates those that do not exist: only an
  // admin makes tokens.
  static std::string create(pqxx::work& tx, const std::string& name, Scope scope,
                            const std::optional<std::vector<std::string>>& projects = std::nullopt);
  static std::vector<TokenInfo> list(pqxx::work& tx);
  // The stored facts of a token, by its secret.
  static TokenInfo info(pqxx::work& tx, const std::string& token);
  // Revokes by numeric id or by name; returns how many were revoked.
  static int revoke(pqxx::work& tx, const std::string& id_or_name);
  static std::optional<Caller> authenticate(pqxx::work& tx, const std::string& token);
  static bool is_valid(pqxx::work& tx, const std::string& token);
};

}  // namespace kw::server
