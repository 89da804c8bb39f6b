#pragma once

#include <ostream>

#include <CLI/CLI.hpp>

#include "app/cli/cli_flags.h"
#include "app/cli/project_command.h"

namespace shardscope::cli {

// `shardscope project`'s flags: its own (--hardware, --collective, a trace, ...) and the run
// flags of a configuration to project, whose precision defaults to bf16 (kProjectedPrecision).
struct ProjectArgs {
  CLI::App* app = nullptr;
  RunFlags flags;
  ProjectOptions options;
  CLI::Option* ranks = nullptr;
};

void add_project_subcommand(CLI::App& app, ProjectArgs* project);

// The parsed flags as a Config and ProjectOptions, then project_command. Returns the exit code.
int dispatch_project(ProjectArgs& project, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
