#include "store/token_repository.hpp"

#include <openssl/rand.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "kw/common/sha256.hpp"
#include "store/pg_array.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

namespace {

std::string to_hex(const unsigned char* data, std::size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 15]);
  }
  return out;
}

// NULL: every project.
std::optional<std::vector<std::string>> projects_of(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return nlohmann::json::parse(field.c_str()).get<std::vector<std::string>>();
}

}  // namespace

std::vector<Statement> TokenRepository::statements() {
  return {
      {"token_lookup",
       "UPDATE api_tokens SET last_used_at = now() "
       "WHERE token_sha256 = $1 AND revoked_at IS NULL "
       "  AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute') "
       "RETURNING id, name, scope, array_to_json(projects)::text"},
      {"token_lookup_readonly",
       "SELECT id, name, scope, array_to_json(projects)::text FROM api_tokens "
       "WHERE token_sha256 = $1 AND revoked_at IS NULL"},
  };
}

std::string TokenRepository::create(pqxx::work& tx, const std::string& name, Scope scope,
                                    const std::optional<std::vector<std::string>>& projects) {
  if (name.empty()) throw std::invalid_argument("a token needs a name");
  if (projects) {
    if (projects->empty()) throw std::invalid_argument("a token scoped to projects names at least one");
    for (const std::string& project : *projects) RunRepository::ensure_project(tx, project);
  }
  unsigned char secret[24];
  if (RAND_bytes(secret, sizeof(secret)) != 1) throw std::runtime_error("RAND_bytes failed");
  std::string token = "kw_" + to_hex(secret, sizeof(secret));
  tx.exec_params(
      "INSERT INTO api_tokens (name, scope, token_sha256, projects) VALUES ($1, $2, $3, $4::text[])", name,
      std::string(to_string(scope)), common::sha256_hex(token), nullable(text_array(projects)));
  return token;
}

namespace {

std::vector<TokenInfo> tokens_where(pqxx::work& tx, const std::string& where, const std::string& value) {
  std::vector<TokenInfo> tokens;
  for (const auto& row :
       tx.exec_params("SELECT id, name, scope, created_at::text, COALESCE(last_used_at::text, ''), "
                      "COALESCE(revoked_at::text, ''), array_to_json(projects)::text FROM api_tokens WHERE " +
                          where + " ORDER BY id",
                      value)) {
    tokens.push_back({row[0].as<std::int64_t>(), row[1].as<std::string>(),
                      scope_from(row[2].as<std::string>()).value_or(Scope::read), row[3].as<std::string>(),
                      row[4].as<std::string>(), row[5].as<std::string>(), projects_of(row[6])});
  }
  return tokens;
}

}  // namespace

std::vector<TokenInfo> TokenRepository::list(pqxx::work& tx) {
  return tokens_where(tx, "$1 = ''", "");
}

TokenInfo TokenRepository::info(pqxx::work& tx, const std::string& token) {
  return tokens_where(tx, "token_sha256 = $1", common::sha256_hex(token)).at(0);
}

int TokenRepository::revoke(pqxx::work& tx, const std::string& id_or_name) {
  bool numeric = !id_or_name.empty() && id_or_name.find_first_not_of("0123456789") == std::string::npos;
  pqxx::result result =
      numeric
          ? tx.exec_params("UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
                           std::stoll(id_or_name))
          : tx.exec_params("UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL",
                           id_or_name);
  return static_cast<int>(result.affected_rows());
}

std::optional<Caller> TokenRepository::authenticate(pqxx::work& tx, const std::string& token) {
  std::string hash = common::sha256_hex(token);
  // Touch last_used_at at most once a minute, so authentication stays a read
  // on the hot path.
  pqxx::result rows = tx.exec_prepared("token_lookup", hash);
  if (rows.empty()) rows = tx.exec_prepared("token_lookup_readonly", hash);
  if (rows.empty()) return std::nullopt;
  auto scope = scope_from(rows[0][2].as<std::string>());
  if (!scope) return std::nullopt;
  return Caller{rows[0][0].as<std::int64_t>(), rows[0][1].as<std::string>(), *scope, projects_of(rows[0][3])};
}

bool TokenRepository::is_valid(pqxx::work& tx, const std::string& token) {
  return !tx.exec_prepared("token_lookup_readonly", common::sha256_hex(token)).empty();
}

}  // namespace kw::server
