// attnprof's command line: parse, validate, call the library, print. Every
// usage error is one line on stderr and exit code 2.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "cli/options.h"

namespace {
// Milliseconds from process start to now (10 ms resolution): /proc gives the
// start time in clock ticks since boot and the uptime in seconds.
std::optional<double> ms_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0.0;
  if (!std::getline(stat, line) || !(uptime >> up)) return std::nullopt;
  std::istringstream fields(line.substr(line.rfind(')') + 2));  // skip "pid (comm) "
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return up * 1000.0 - std::stod(field) * 1000.0 / double(sysconf(_SC_CLK_TCK));
  }
  return std::nullopt;
}
}  // namespace

namespace {
int run(int argc, char** argv);
}  // namespace

// Every file a command writes is complete (renamed into place) before it
// returns, so the process ends here without running static destructors:
// LibTorch's and Kineto's background threads can still be alive then, and
// tearing their state down under them corrupted the heap at exit now and then
// (seen as "malloc(): unsorted double linked list corrupted" after the
// full-disk error, 1 run in ~5 under ctest).
int main(int argc, char** argv) {
  const int code = run(argc, argv);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

namespace {
int run(int argc, char** argv) {
  using namespace attnprof;
  using namespace attnprof::cli;
  CliOptions o;
  o.startup_ms = ms_since_process_start();
  CLI::App app{"attnprof: what really runs on the GPU when a model computes attention.\n"
               "Profiles one or more attention variants with the PyTorch (Kineto) profiler and writes\n"
               "a Chrome trace (open it in ui.perfetto.dev), a key-averages table and a summary JSON."};
  app.name("attnprof");
  add_variant_option(app, o);
  add_shape_options(app, o);
  add_run_options(app, o);
  add_distributed_options(app, o);
  app.add_option("--peak-tflops", o.peak_tflops,
                 "Device peak for the at-a-glance table's % of peak (default: from a table of known GPUs)")
      ->check(positive_number());
  app.add_flag("--list-variants", o.list_variants, "List the variants, what each shows, and whether it can run here");
  app.set_version_flag("--version", std::string(ATTNPROF_VERSION));
  const std::vector<Subcommand> subcommands = {add_sweep_command(app), add_compare_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    fmt::print(stderr, "attnprof: error: {} (see attnprof --help)\n", msg);
    return exit_code::kUsage;
  }
  try {
    for (const Subcommand& sub : subcommands)
      if (sub.app->parsed()) return sub.action();
    if (o.list_variants) return list_variants(o);
    if (const auto rc = run_distributed(o)) return *rc;
    return run_profile(o);
  } catch (const UsageError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kRunFailed;
  }
}
}  // namespace
