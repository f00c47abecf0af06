#include "store/migrations.hpp"

#include <algorithm>
#include <stdexcept>

#include "kw/schema/migrations.hpp"
#include "log_line.hpp"

namespace kw::server {

int apply_migrations(pqxx::connection& connection, int up_to) {
  pqxx::work tx(connection);
  // Servers starting together on one database migrate one after the other:
  // the lock comes before any DDL (CREATE TABLE IF NOT EXISTS is no guard
  // against a concurrent create of the same table), and the transaction's
  // end releases it.
  tx.exec("SELECT pg_advisory_xact_lock(7743784955077291361)");  // "kwschema" as a number
  tx.exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations ("
      "  version integer PRIMARY KEY,"
      "  name text NOT NULL,"
      "  applied_at timestamptz NOT NULL DEFAULT now())");
  int current = tx.exec("SELECT COALESCE(max(version), 0) FROM schema_migrations")[0][0].as<int>();
  if (current > schema::kLatestVersion) {
    throw std::runtime_error("the database schema is at version " + std::to_string(current) +
                             ", newer than this kw-server knows (" + std::to_string(schema::kLatestVersion) +
                             "); run a newer kw-server");
  }
  for (const schema::Migration& migration : schema::kMigrations) {
    if (migration.version <= current || migration.version > up_to) continue;
    LogLine() << "kw-server: applying migration " << migration.name << "\n";
    tx.exec(std::string(migration.sql));
    tx.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", migration.version,
                   std::string(migration.name));
  }
  tx.commit();
  return std::min(up_to, schema::kLatestVersion);
}

}  // namespace kw::server
