// Child processes for the embedded PostgreSQL tools (initdb, pg_ctl).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kw::server {

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (a path) to completion. When `run_as` names a user and this
// process is root, the child drops to that user first (PostgreSQL refuses to
// run as root).
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::optional<std::string>& run_as = {});

}  // namespace kw::server
