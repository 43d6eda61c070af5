// The text of Python's `prof.key_averages().table(sort_by=..., row_limit=...)`
// (torch 2.11's profiler_util._build_table: column widths, truncation, time
// formats, footer totals) for rows from report/key_averages.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnprof/report/key_averages.h"

namespace attnprof {

struct TableTotals {
  int64_t self_cpu_time_total_ns = 0;
  int64_t self_device_time_total_ns = 0;  // user annotations on the device excluded
};
TableTotals table_totals(const std::vector<OpStats>& rows);

struct TableOptions {
  SortKey sort_by = SortKey::CpuTimeTotal;
  int row_limit = 15;             // <= 0 means all rows
  int max_name_column_width = 55;
  std::string device_label = "CUDA";
  // As Python's table of a profile_memory run: "CPU Mem" and "Self CPU Mem"
  // columns, and "CUDA Mem", "Self CUDA Mem" when some row allocated device memory.
  bool profile_memory = false;
};

// Python's _format_memory: "1.50 MB", "-4.00 KB", "12 B" (powers of 1024).
std::string format_memory(int64_t bytes);

std::string format_key_averages_table(const std::vector<OpStats>& rows, const TableOptions& opt);

// Python's _format_time: "12.345us", "1.234ms", "1.234s".
std::string format_time_us(double us);

}  // namespace attnprof
