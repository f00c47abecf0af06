// kw: the GPU-host agent and the CI client.
#include <signal.h>

#include <iostream>

#include "cli/commands.hpp"

namespace {

void on_signal(int) {
  kw::agent::stop_requested() = true;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  CLI::App app{"kw: kernelwatch agent and CI client"};
  app.set_version_flag("--version", std::string("kw ") + KW_VERSION);
  app.require_subcommand(1);
  int exit_code = kw::agent::kExitOk;
  kw::agent::add_validate_command(app, exit_code);
  kw::agent::add_run_command(app, exit_code);
  kw::agent::add_upload_command(app, exit_code);
  kw::agent::add_agent_command(app, exit_code);
  kw::agent::add_gate_commands(app, exit_code);
  kw::agent::add_gpu_check_command(app, exit_code);
  kw::agent::add_profile_command(app, exit_code);
  kw::agent::add_harness_path_command(app, exit_code);
  kw::agent::add_doctor_command(app, exit_code);
  kw::agent::add_init_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kw::agent::kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "kw: " << error.what() << std::endl;
    return kw::agent::kExitInfrastructure;
  }
  return exit_code;
}
