// `attnprof compare`: placeholder registration until compare lands (issue 5).
#include <fmt/format.h>

#include "cli/exit_codes.h"
#include "cli/options.h"

namespace attnprof::cli {

Subcommand add_compare_command(CLI::App& app) {
  Subcommand s;
  s.app = app.add_subcommand("compare", "Diff two summary.json files (or two output directories)");
  s.action = [] {
    fmt::print(stderr, "attnprof: error: compare is not implemented yet\n");
    return exit_code::kUsage;
  };
  return s;
}

}  // namespace attnprof::cli
