// ctest fixture: `kw-test-postgres start DIR` before the db tests, `stop DIR`
// after, so every test process shares one cluster (and makes its own database).
#include <filesystem>
#include <iostream>

#include "store/embedded_postgres.hpp"

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
