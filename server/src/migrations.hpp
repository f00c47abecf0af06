#pragma once

#include <pqxx/pqxx>

namespace kw::server {

// Applies the embedded migrations newer than the database's version in one
// transaction; throws if the database is newer than this binary. Returns the
// schema version now in force.
int apply_migrations(pqxx::connection& connection);

}  // namespace kw::server
