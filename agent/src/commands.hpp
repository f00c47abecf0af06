// The `kw` subcommands. Each registers itself on the CLI11 app and returns the
// process exit code through the callback it installs.
#pragma once

#include <CLI/CLI.hpp>

namespace kw::agent {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 64;

void add_validate_command(CLI::App& app, int& exit_code);

}  // namespace kw::agent
