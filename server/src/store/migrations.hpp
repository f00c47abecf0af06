#pragma once

#include <pqxx/pqxx>

namespace kw::server {

#include <climits>

// Applies the embedded migrations newer than the database's version (and at
// most `up_to`: tests build older schemas) in one transaction; throws if the
// database is newer than this binary. Returns the schema version now in force.
int apply_migrations(pqxx::connection& connection, int up_to = INT_MAX);

}  // namespace kw::server
