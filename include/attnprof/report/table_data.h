// A table as data (already-formatted cells) and its printers. Printers only
// format: what to show and how to round it is decided where the Table is built.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnprof::report {

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // each row has columns.size() cells
  // Per column; right-aligned in text and Markdown. Missing entries mean text.
  std::vector<bool> numeric;

  bool is_numeric(size_t column) const { return column < numeric.size() && numeric[column]; }
};

// Every printer throws std::invalid_argument when a row's cell count differs
// from the column count: a silently shifted cell would mislabel a figure.

// Aligned columns for a terminal; a line break inside a cell becomes a space.
std::string to_text(const Table& table);
// RFC 4180 quoting (fields holding a comma, quote, CR or LF are quoted, quotes
// doubled); records end in "\n", as Unix tools expect.
std::string to_csv(const Table& table);
// A GitHub pipe table: `|` is escaped, line breaks become <br>.
std::string to_markdown(const Table& table);
// An array of objects keyed by column name, cells as strings. Also throws
// std::invalid_argument on duplicate column names, which would collide as keys.
nlohmann::json to_json(const Table& table);

// Writes `<stem>.txt`, `.csv`, `.md` and `.json` (each atomically) and returns
// their paths. Throws io::FileError when a file cannot be written.
std::vector<std::string> write_table_files(const Table& table, const std::string& stem);

}  // namespace attnprof::report
