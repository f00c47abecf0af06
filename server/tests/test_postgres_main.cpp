// ctest fixture: `kw-test-postgres start DIR` before the db tests, `stop DIR`
// after, so every test process shares one cluster (and makes its own database).
//
// The shared cluster trusts loopback connections; kw-server's own clusters
// (and every other test's: the e2e tests', ServerProcessTest's,
// ReplicaReadsTest's) keep SCRAM. A SCRAM login is 4,096 rounds of
// HMAC-SHA-256 in the client and again in the server, and a db test opens a
// dozen connections: it was nine tenths of a db test process's CPU time.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <pqxx/pqxx>

#include "store/embedded_postgres.hpp"

namespace {

// pg_hba.conf's IPv4 loopback line for every database, SCRAM to trust; the
// postmaster rereads it.
void trust_loopback(const kw::server::EmbeddedPostgres& postgres, const std::filesystem::path& hba_file) {
  std::ifstream in(hba_file);
  if (!in) throw std::runtime_error("cannot read " + hba_file.string());
  std::ostringstream rewritten;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string type, database, user, address, method;
    words >> type >> database >> user >> address >> method;
    if (type == "host" && database == "all" && address == "127.0.0.1/32" && method == "scram-sha-256") {
      line = "host all all 127.0.0.1/32 trust  # kw-test-postgres: test clusters only";
      found = true;
    }
    rewritten << line << "\n";
  }
  in.close();
  if (!found) throw std::runtime_error(hba_file.string() + " has no scram-sha-256 line for 127.0.0.1/32");
  std::ofstream out(hba_file, std::ios::trunc);  // the same file: its owner and mode stay
  out << rewritten.str();
  if (!out.flush()) throw std::runtime_error("cannot write " + hba_file.string());
  pqxx::connection connection(postgres.url("postgres"));
  pqxx::nontransaction tx(connection);
  if (!tx.exec1("SELECT pg_reload_conf()")[0].as<bool>())
    throw std::runtime_error("PostgreSQL did not reload " + hba_file.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "start" && std::string(argv[1]) != "stop")) {
    std::cerr << "usage: kw-test-postgres start|stop DIR\n";
    return 64;
  }
  try {
    std::filesystem::path dir = argv[2];
    if (std::string(argv[1]) == "start") {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      // As root, the cluster's user (postgres) passes through the folder of
      // the tests' clusters too, whatever the umask made it.
      std::filesystem::permissions(dir.parent_path(),
                                   std::filesystem::perms::group_exec | std::filesystem::perms::others_exec,
                                   std::filesystem::perm_options::add);
      kw::server::EmbeddedPostgres postgres(dir);
      postgres.start();
      postgres.keep_running();
      trust_loopback(postgres, dir / "postgres" / "pg_hba.conf");
      std::cout << "test PostgreSQL running in " << dir << " on port " << postgres.port() << "\n";
    } else {
      kw::server::EmbeddedPostgres postgres(dir);
      postgres.start();  // adopts the running postmaster
      postgres.stop();
      std::filesystem::remove_all(dir);
      std::cout << "test PostgreSQL stopped\n";
    }
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "kw-test-postgres: " << error.what() << "\n";
    return 1;
  }
}
