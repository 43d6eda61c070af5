// `attnprof sweep`: placeholder registration until the sweep lands (issue 5).
#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/options.h"

namespace attnprof::cli {

Subcommand add_sweep_command(CLI::App& app) {
  Subcommand s;
  s.app = app.add_subcommand("sweep", "Sweep shapes, dtypes and variants; write a CSV and SVG plots");
  s.action = [] {
    fmt::print(stderr, "attnprof: error: sweep is not implemented yet\n");
    return exit_code::kUsage;
  };
  return s;
}

}  // namespace attnprof::cli
