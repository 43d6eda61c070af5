// A table as typed data and its printers. Cells hold numbers (or text, or
// nothing); columns say what the numbers are. Printers only format: text and
// Markdown write a number as its column's format says ("1.00x", "1.6%",
// "528.00 MiB"), CSV and JSON always write the plain number under a column key
// that names the unit ("speedup_vs_naive", "pct_of_peak",
// "peak_memory_bytes"), and a missing value as an empty field / null.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace attnprof::io {
class StagedFiles;
}

namespace attnprof::report {

// How text and Markdown write a number.
struct NumberFormat {
  enum class Style {
    general,  // {:.Ng}: N significant digits
    fixed,    // {:.Nf}
    bytes,    // 4.40 GiB, 528.00 MiB
    ratio,    // {:.Nf}x
    percent,  // {:.Nf}% (the value is already in percent)
    time_us,  // Python profiler style: 12.345us, 1.234ms
  };
  Style style = Style::general;
  int precision = 6;
};

struct Column {
  std::string label;   // header in text and Markdown
  std::string key;     // header in CSV and key in JSON: snake_case, unit included
  bool numeric = false;
  NumberFormat format;
};
Column text_column(std::string label, std::string key);
Column number_column(std::string label, std::string key, NumberFormat format = {});

using Cell = std::variant<std::monostate, double, std::string>;
Cell number_cell(const std::optional<double>& v);  // nullopt or NaN -> missing

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has columns.size() cells
  std::string missing = "n/a";          // what text and Markdown show for a missing value
};

// Every printer throws std::invalid_argument when a row's cell count differs
// from the column count: a silently shifted cell would mislabel a figure.

// The cell as people read it (text and Markdown).
std::string display(const Table& table, size_t column, const Cell& cell);
// Aligned columns for a terminal; a line break inside a cell becomes a space.
std::string to_text(const Table& table);
// RFC 4180 quoting (fields holding a comma, quote, CR or LF are quoted, quotes
// doubled); records end in "\n", as Unix tools expect. Numbers unformatted.
std::string to_csv(const Table& table);
// A GitHub pipe table: `|` is escaped, line breaks become <br>.
std::string to_markdown(const Table& table);
// An array of objects keyed by column key; numbers as numbers, missing as null.
// Also throws std::invalid_argument on duplicate keys, which would collide.
nlohmann::json to_json(const Table& table);
// A JSON file's text: indented by 2, a newline at the end, and bytes that are
// not UTF-8 (a path or a message from outside) replaced rather than thrown on.
std::string json_text(const nlohmann::json& j);

// Stages `<stem>.txt`, `.csv`, `.md` and `.json` into `files` (published
// with the rest of the set) and returns their paths. `title`, when given,
// heads the .txt and (in bold) the .md. Throws io::FileError.
std::vector<std::string> stage_table_files(io::StagedFiles& files, const Table& table, const std::string& stem,
                                           const std::string& title = "");
// The same four files as a set of their own, published at once.
std::vector<std::string> write_table_files(const Table& table, const std::string& stem,
                                           const std::string& title = "");

std::string format_bytes(double bytes);  // "4.40 GiB", "512.00 MiB"

}  // namespace attnprof::report
