// The `kw` subcommands. Each registers itself on the CLI11 app and sets the
// process exit code through the callback it installs.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "host/process.hpp"
#include "kw/http/client.hpp"

namespace kw::agent {

// Exit codes shared by every subcommand. Every command that learns a
// verdict (kw submit --wait, kw gate, kw run --server, kw upload) exits with
// the same: 0 pass or improvement, 1 regression, 2 a failed stage, 3 no
// verdict (the server unreachable or refusing, a file unreadable).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRegression = 1;
inline constexpr int kExitInvalid = 1;    // kw validate-config: the config has problems
inline constexpr int kExitPreflight = 2;  // a preflight stage (config included) failed
inline constexpr int kExitInfrastructure = 3;
inline constexpr int kExitUsage = 64;

void add_validate_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);
void add_upload_command(CLI::App& app, int& exit_code);
void add_agent_command(CLI::App& app, int& exit_code);
void add_gate_commands(CLI::App& app, int& exit_code);  // kw submit, kw gate
void add_gpu_check_command(CLI::App& app, int& exit_code);
void add_profile_command(CLI::App& app, int& exit_code);
// kw init: a first kernelwatch.json (init_command.hpp).
void add_init_command(CLI::App& app, int& exit_code);
// kw harness-path: where kwbench.py is (python_harness.hpp).
void add_harness_path_command(CLI::App& app, int& exit_code);
// kw doctor: what this host gives kernelwatch, and what is missing.
void add_doctor_command(CLI::App& app, int& exit_code);

// A stored run's verdict, printed as kw gate prints it (the regressed cases,
// a failed stage, the link to its dashboard page); its exit code.
int gate_run(http::Client& client, const std::string& server, std::int64_t run_id);

// Server and token from the flags, else KW_SERVER / KW_TOKEN. A token on the
// command line still works, with a warning: every user of the host sees it.
struct ServerOptions {
  std::string url;
  std::string token;
  std::string token_file;
  void add_to(CLI::App& command);
  void resolve();  // fills from the environment; throws CLI::ValidationError when missing
};

}  // namespace kw::agent
