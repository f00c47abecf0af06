# Sets KW_SERVER_DEPS_FOUND and the imported targets kw-server needs: Boost
# (Asio/Beast headers), libpqxx (pkg-config), OpenSSL (token hashes, webhook
# HMAC) and the PostgreSQL server binaries (initdb/pg_ctl for the embedded
# cluster).
set(KW_SERVER_DEPS_FOUND TRUE)
set(KW_SERVER_DEPS_MISSING "")

# kw_server_dep(FOUND WHAT): WHAT is missing unless FOUND is true.
macro(kw_server_dep found what)
  if(NOT ${found})
    set(KW_SERVER_DEPS_FOUND FALSE)
    list(APPEND KW_SERVER_DEPS_MISSING "${what}")
  endif()
endmacro()

find_package(Boost 1.74 CONFIG QUIET)
kw_server_dep(Boost_FOUND "Boost >= 1.74")
find_package(OpenSSL QUIET)
kw_server_dep(OPENSSL_FOUND "OpenSSL")
kw_server_dep(CLI11_FOUND "CLI11")
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PQXX QUIET IMPORTED_TARGET libpqxx)
  # libpq itself: the database monitor's non-blocking pings.
  pkg_check_modules(PQ QUIET IMPORTED_TARGET libpq)
endif()
kw_server_dep(PQXX_FOUND "libpqxx")
kw_server_dep(PQ_FOUND "libpq")

file(GLOB _kw_pg_bins /usr/lib/postgresql/*/bin/initdb)
find_program(KW_PG_CONFIG pg_config)
if(KW_PG_CONFIG)
  execute_process(COMMAND ${KW_PG_CONFIG} --bindir OUTPUT_VARIABLE _kw_pg_bindir
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(EXISTS "${_kw_pg_bindir}/initdb")
    list(APPEND _kw_pg_bins "${_kw_pg_bindir}/initdb")
  endif()
endif()
kw_server_dep(_kw_pg_bins "PostgreSQL server binaries (initdb, pg_ctl)")
