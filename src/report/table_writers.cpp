#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attnprof/io/files.h"
#include "attnprof/report/key_averages_table.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {
namespace {

void check_shape(const Table& table) {
  for (size_t r = 0; r < table.rows.size(); ++r) {
    if (table.rows[r].size() != table.columns.size())
      throw std::invalid_argument(fmt::format("table row {} has {} cells, expected {}", r,
                                              table.rows[r].size(), table.columns.size()));
  }
}

// Terminal columns, not bytes: "µs" is three bytes but two columns. Counts
// UTF-8 lead bytes, which is right for the Latin and symbol text we print.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

std::string flatten_line_breaks(const std::string& cell, std::string_view replacement) {
  return replace_all(replace_all(replace_all(cell, "\r\n", "\n"), "\r", "\n"), "\n", replacement);
}

using CellFormat = std::string (*)(const std::string&);

std::vector<std::string> format_row(const std::vector<std::string>& row, CellFormat format_cell) {
  std::vector<std::string> cells;
  cells.reserve(row.size());
  for (const auto& cell : row) cells.push_back(format_cell(cell));
  return cells;
}

// Header first, then the rows as people read them, every cell passed through `format_cell`.
std::vector<std::vector<std::string>> formatted_grid(const Table& table, CellFormat format_cell) {
  std::vector<std::vector<std::string>> grid;
  grid.reserve(table.rows.size() + 1);
  std::vector<std::string> header;
  for (const Column& c : table.columns) header.push_back(c.label);
  grid.push_back(format_row(header, format_cell));
  for (const auto& row : table.rows) {
    std::vector<std::string> shown;
    for (size_t c = 0; c < row.size(); ++c) shown.push_back(display(table, c, row[c]));
    grid.push_back(format_row(shown, format_cell));
  }
  return grid;
}

bool is_numeric(const Table& t, size_t c) { return c < t.columns.size() && t.columns[c].numeric; }

// CSV/JSON: the shortest text that reads back as the same double.
std::string plain_number(double v) { return fmt::format("{}", v); }

std::vector<size_t> column_widths(const std::vector<std::vector<std::string>>& grid,
                                  size_t min_width) {
  std::vector<size_t> widths(grid.front().size(), min_width);
  for (const auto& row : grid)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  return widths;
}

std::string pad(const std::string& cell, size_t width, bool right_align) {
  const std::string fill(width - display_width(cell), ' ');
  return right_align ? fill + cell : cell + fill;
}

std::string text_cell(const std::string& cell) { return flatten_line_breaks(cell, " "); }

std::string markdown_cell(const std::string& cell) {
  return replace_all(flatten_line_breaks(cell, "<br>"), "|", "\\|");
}

std::string csv_field(const std::string& cell) {
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  return "\"" + replace_all(cell, "\"", "\"\"") + "\"";
}

std::string rstrip(std::string s) {
  s.erase(s.find_last_not_of(' ') + 1);
  return s;
}

}  // namespace

Column text_column(std::string label, std::string key) { return {std::move(label), std::move(key), false, {}}; }

Column number_column(std::string label, std::string key, NumberFormat format) {
  return {std::move(label), std::move(key), true, format};
}

Cell number_cell(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return std::monostate{};
  return *v;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string display(const Table& table, size_t column, const Cell& cell) {
  if (const std::string* t = std::get_if<std::string>(&cell)) return *t;
  const double* d = std::get_if<double>(&cell);
  if (!d) return table.missing;
  using S = NumberFormat::Style;
  const NumberFormat f = column < table.columns.size() ? table.columns[column].format : NumberFormat{};
  switch (f.style) {
    case S::general: return fmt::format("{:.{}g}", *d, f.precision);
    case S::fixed: return fmt::format("{:.{}f}", *d, f.precision);
    case S::bytes: return format_bytes(*d);
    case S::ratio: return fmt::format("{:.{}f}x", *d, f.precision);
    case S::percent: return fmt::format("{:.{}f}%", *d, f.precision);
    case S::time_us: return format_time_us(*d);
  }
  return fmt::format("{}", *d);
}

std::string to_text(const Table& table) {
  check_shape(table);
  if (table.columns.empty()) return {};
  const auto grid = formatted_grid(table, text_cell);
  const auto widths = column_widths(grid, 1);
  std::string out;
  auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c)
      line += (c ? "  " : "") + pad(cells[c], widths[c], is_numeric(table, c));
    out += rstrip(std::move(line)) + "\n";
  };
  append_line(grid.front());
  std::vector<std::string> rule;
  for (size_t w : widths) rule.emplace_back(w, '-');
  append_line(rule);
  for (size_t r = 1; r < grid.size(); ++r) append_line(grid[r]);
  return out;
}

std::string to_csv(const Table& table) {
  check_shape(table);
  std::string out;
  auto append_record = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) out += (c ? "," : "") + csv_field(cells[c]);
    out += "\n";
  };
  std::vector<std::string> header;
  for (const Column& c : table.columns) header.push_back(c.key);
  append_record(header);
  for (const auto& row : table.rows) {
    std::vector<std::string> fields;
    for (const Cell& cell : row) {
      if (const double* d = std::get_if<double>(&cell)) fields.push_back(plain_number(*d));
      else if (const std::string* t = std::get_if<std::string>(&cell)) fields.push_back(*t);
      else fields.emplace_back();
    }
    append_record(fields);
  }
  return out;
}

std::string to_markdown(const Table& table) {
  check_shape(table);
  if (table.columns.empty()) return {};
  const auto grid = formatted_grid(table, markdown_cell);
  // Three dashes is the shortest delimiter GitHub accepts.
  const auto widths = column_widths(grid, 3);
  std::string out;
  auto append_row = [&](const std::vector<std::string>& cells) {
    out += "|";
    for (size_t c = 0; c < cells.size(); ++c)
      out += " " + pad(cells[c], widths[c], is_numeric(table, c)) + " |";
    out += "\n";
  };
  append_row(grid.front());
  out += "|";
  for (size_t c = 0; c < widths.size(); ++c)
    out += is_numeric(table, c) ? " " + std::string(widths[c] - 1, '-') + ": |"
                               : " " + std::string(widths[c], '-') + " |";
  out += "\n";
  for (size_t r = 1; r < grid.size(); ++r) append_row(grid[r]);
  return out;
}

nlohmann::json to_json(const Table& table) {
  check_shape(table);
  std::set<std::string> unique;
  for (const Column& c : table.columns) unique.insert(c.key);
  if (unique.size() != table.columns.size())
    throw std::invalid_argument("table has duplicate column keys; JSON keys would collide");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : table.rows) {
    nlohmann::json object = nlohmann::json::object();
    for (size_t c = 0; c < row.size(); ++c) {
      nlohmann::json& v = object[table.columns[c].key];
      if (const double* d = std::get_if<double>(&row[c])) v = std::isfinite(*d) ? nlohmann::json(*d) : nullptr;
      else if (const std::string* t = std::get_if<std::string>(&row[c])) v = *t;
      else v = nullptr;
    }
    rows.push_back(std::move(object));
  }
  return rows;
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<std::string> write_table_files(const Table& table, const std::string& stem, const std::string& title) {
  io::StagedFiles files;
  std::vector<std::string> paths = stage_table_files(files, table, stem, title);
  files.publish();
  return paths;
}

std::vector<std::string> stage_table_files(io::StagedFiles& files, const Table& table, const std::string& stem,
                                           const std::string& title) {
  // Formatted before anything is staged, so a malformed table stages nothing.
  const std::vector<std::pair<std::string, std::string>> outputs{
      {stem + ".txt", (title.empty() ? "" : title + "\n\n") + to_text(table)},
      {stem + ".csv", to_csv(table)},
      {stem + ".md", (title.empty() ? "" : "**" + title + "**\n\n") + to_markdown(table)},
      {stem + ".json", json_text(to_json(table))}};
  std::vector<std::string> paths;
  for (const auto& [path, bytes] : outputs) {
    files.add(path, bytes);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace attnprof::report
