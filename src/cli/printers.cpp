#include "cli/printers.h"

#include <fmt/format.h>

#include "attnprof/report/headline.h"
#include "attnprof/report/launch_facts.h"
#include "attnprof/report/run_files.h"

namespace attnprof::cli {

std::string run_text(const RunRecord& r, const TableOptions& table, bool kernels, const std::string& out_dir) {
  std::string out = "\n" + report::run_table_text(r, table) + "\n" + report::headline_text(r);
  if (kernels && !r.launches.empty()) out += "\n" + report::format_launch_table(r.launches);
  out += fmt::format("  files: {}/{{{}, {}, {}}}\n", out_dir, r.trace_file, r.table_file, r.summary_file);
  return out;
}

std::string progress_line(size_t index, size_t count, const std::string& variant, const Problem& p) {
  return fmt::format("[{}/{}] {} ({} {} on {})", index + 1, count, variant, p.shape_string(), p.config_string(),
                     p.device);
}

}  // namespace attnprof::cli
