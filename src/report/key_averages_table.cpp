#include "attnprof/report/key_averages_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attnprof {

TableTotals table_totals(const std::vector<OpStats>& rows) {
  TableTotals t;
  for (const OpStats& s : rows) {
    t.self_cpu_time_total_ns += s.self_cpu_time_total_ns;
    if (s.device == EventDevice::Cuda && !s.is_user_annotation)
      t.self_device_time_total_ns += s.self_device_time_total_ns;
  }
  return t;
}

std::string format_time_us(double us) {
  if (us >= 1e6) return fmt::format("{:.3f}s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.3f}ms", us / 1e3);
  return fmt::format("{:.3f}us", us);
}

std::string format_memory(int64_t bytes) {
  constexpr double kKB = 1024.0, kMB = 1024.0 * kKB, kGB = 1024.0 * kMB;
  const double b = double(bytes), mag = std::abs(b);
  if (mag >= kGB) return fmt::format("{:.2f} GB", b / kGB);
  if (mag >= kMB) return fmt::format("{:.2f} MB", b / kMB);
  if (mag >= kKB) return fmt::format("{:.2f} KB", b / kKB);
  return std::to_string(bytes) + " B";
}

namespace {
std::string time_share(int64_t part_ns, int64_t total_ns) {
  if (total_ns == 0) return "NaN";
  return fmt::format("{:.2f}%", double(part_ns) * 100.0 / double(total_ns));
}
std::string us(double ns) { return format_time_us(ns / 1000.0); }
}  // namespace

std::string format_key_averages_table(const std::vector<OpStats>& unsorted, const TableOptions& opt) {
  if (unsorted.empty()) return "";
  const std::vector<OpStats> rows = sort_rows(unsorted, opt.sort_by);
  const bool has_device_time = std::any_of(rows.begin(), rows.end(),
                                           [](const OpStats& s) { return s.self_device_time_total_ns > 0; });
  const bool has_device_mem = opt.profile_memory && std::any_of(rows.begin(), rows.end(), [](const OpStats& s) {
                                return s.self_device_memory_usage > 0;
                              });

  size_t longest = 0;
  for (const OpStats& s : rows) longest = std::max(longest, s.name.size());
  const int name_width = std::min<int>(static_cast<int>(longest) + 4, opt.max_name_column_width);
  constexpr int kColumnWidth = 12;
  constexpr int kSpacing = 2;

  std::vector<std::string> headers = {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"};
  if (has_device_time) {
    const std::string& d = opt.device_label;
    headers.insert(headers.end(), {"Self " + d, "Self " + d + " %", d + " total", d + " time avg"});
  }
  if (opt.profile_memory) headers.insert(headers.end(), {"CPU Mem", "Self CPU Mem"});
  if (has_device_mem) headers.insert(headers.end(), {opt.device_label + " Mem", "Self " + opt.device_label + " Mem"});
  headers.emplace_back("# of Calls");

  std::string sep;
  auto format_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const int width = i == 0 ? name_width : kColumnWidth;
      line += fmt::format("{:>{}}", cells[i], width) + std::string(kSpacing, ' ');
    }
    return line + "\n";
  };
  for (size_t i = 0; i < headers.size(); ++i)
    sep += std::string(i == 0 ? name_width : kColumnWidth, '-') + std::string(kSpacing, ' ');
  sep += "\n";

  const TableTotals totals = table_totals(rows);
  std::string out = sep + format_row(headers) + sep;
  int shown = 0;
  for (const OpStats& s : rows) {
    if (opt.row_limit > 0 && shown == opt.row_limit) break;
    ++shown;
    std::string name = s.name;
    const size_t max_name = static_cast<size_t>(opt.max_name_column_width);
    if (name.size() >= max_name - 3) name = name.substr(0, max_name - 3) + "...";
    std::vector<std::string> cells = {
        name,
        time_share(s.self_cpu_time_total_ns, totals.self_cpu_time_total_ns),
        us(double(s.self_cpu_time_total_ns)),
        s.is_async ? std::string("0") : time_share(s.cpu_time_total_ns, totals.self_cpu_time_total_ns),
        us(double(s.cpu_time_total_ns)),
        us(s.cpu_time_avg_ns()),
    };
    if (has_device_time) {
      cells.push_back(us(double(s.self_device_time_total_ns)));
      cells.push_back(time_share(s.self_device_time_total_ns, totals.self_device_time_total_ns));
      cells.push_back(us(double(s.device_time_total_ns)));
      cells.push_back(us(s.device_time_avg_ns()));
    }
    if (opt.profile_memory) {
      cells.push_back(format_memory(s.cpu_memory_usage));
      cells.push_back(format_memory(s.self_cpu_memory_usage));
    }
    if (has_device_mem) {
      cells.push_back(format_memory(s.device_memory_usage));
      cells.push_back(format_memory(s.self_device_memory_usage));
    }
    cells.push_back(std::to_string(s.count));
    out += format_row(cells);
  }
  out += sep;
  out += "Self CPU time total: " + us(double(totals.self_cpu_time_total_ns)) + "\n";
  if (has_device_time)
    out += "Self " + opt.device_label + " time total: " + us(double(totals.self_device_time_total_ns)) + "\n";
  return out;
}

}  // namespace attnprof

