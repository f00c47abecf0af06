// kw: the GPU-host agent and the CI client.
#include <iostream>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kw: kernelwatch agent and CI client"};
  app.set_version_flag("--version", std::string("kw ") + KW_VERSION);
  app.require_subcommand(1);
  int exit_code = kw::agent::kExitOk;
  kw::agent::add_validate_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : kw::agent::kExitUsage;
  }
  return exit_code;
}
