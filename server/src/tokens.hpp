// API tokens: random secrets handed out once, stored only as SHA-256 hashes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "database.hpp"
#include "http_types.hpp"

namespace kw::server {

std::string sha256_hex(std::string_view data);

struct TokenInfo {
  std::int64_t id = 0;
  std::string name;
  Scope scope = Scope::read;
  std::string created_at;
  std::string last_used_at;
  std::string revoked_at;
};

class TokenRepository {
 public:
  static std::vector<Statement> statements();

  // Returns the new token's secret; only its hash is stored.
  static std::string create(pqxx::work& tx, const std::string& name, Scope scope);
  static std::vector<TokenInfo> list(pqxx::work& tx);
  // Revokes by numeric id or by name; returns how many were revoked.
  static int revoke(pqxx::work& tx, const std::string& id_or_name);
  static std::optional<Caller> authenticate(pqxx::work& tx, const std::string& token);
  static bool is_valid(pqxx::work& tx, const std::string& token);
};

}  // namespace kw::server
