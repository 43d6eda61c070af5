// The writers are tested by writing to a temp dir and parsing the files back.
#include "attnprof/report/table_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace attnprof::report {
namespace {

using Rows = std::vector<std::vector<std::string>>;

Table awkward_table() {
  Table t;
  t.columns = {text_column("variant", "variant"), number_column("GPU µs", "gpu_us", {NumberFormat::Style::fixed, 1}),
               text_column("note", "note")};
  t.rows = {{"naive", 1062.0, "DtoD Memcpy, mask \"materialised\""},
            {"sdpa-flash", 94.5, "pipe | inside"},
            {"sdpa-cudnn", 58.6, "two\nlines"},
            {"", Cell{}, ""}};
  return t;
}

// What people see (text, Markdown) and what programs read (CSV) for the rows above.
const Rows kShown = {{"naive", "1062.0", "DtoD Memcpy, mask \"materialised\""},
                     {"sdpa-flash", "94.5", "pipe | inside"},
                     {"sdpa-cudnn", "58.6", "two\nlines"},
                     {"", "n/a", ""}};
const Rows kPlain = {{"naive", "1062", "DtoD Memcpy, mask \"materialised\""},
                     {"sdpa-flash", "94.5", "pipe | inside"},
                     {"sdpa-cudnn", "58.6", "two\nlines"},
                     {"", "", ""}};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// RFC 4180 reader: quoted fields may hold commas, doubled quotes and newlines.
Rows parse_csv(const std::string& text) {
  Rows records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      record.push_back(std::move(field));
      field.clear();
      records.push_back(std::move(record));
      record.clear();
    } else {
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quoted field";
  EXPECT_TRUE(record.empty() && field.empty()) << "last record lacks its newline";
  return records;
}

// Splits a pipe-table line on unescaped `|` and trims the cells.
std::vector<std::string> parse_markdown_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  EXPECT_EQ(cells.front(), "") << "row must start with |";
  EXPECT_TRUE(cell.empty()) << "row must end with |";
  cells.erase(cells.begin());
  for (auto& c : cells) {
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
  }
  return cells;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class TableFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("attnprof_table_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    paths_ = write_table_files(table_, (dir_ / "compare").string());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string file(const std::string& ext) const { return read_all((dir_ / ("compare" + ext)).string()); }

  Table table_ = awkward_table();
  std::filesystem::path dir_;
  std::vector<std::string> paths_;
};

TEST_F(TableFiles, WritesFourFiles) {
  ASSERT_EQ(paths_.size(), 4u);
  for (const auto& p : paths_) EXPECT_TRUE(std::filesystem::is_regular_file(p)) << p;
}

TEST_F(TableFiles, CsvParsesBackToKeysAndPlainNumbers) {
  const Rows records = parse_csv(file(".csv"));
  ASSERT_EQ(records.size(), table_.rows.size() + 1);
  EXPECT_EQ(records.front(), (std::vector<std::string>{"variant", "gpu_us", "note"}));
  for (size_t r = 0; r < kPlain.size(); ++r) EXPECT_EQ(records[r + 1], kPlain[r]);
}

TEST_F(TableFiles, JsonParsesBackToTypedObjectsKeyedByColumnKey) {
  const auto json = nlohmann::json::parse(file(".json"));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), table_.rows.size());
  EXPECT_EQ(json[0].at("variant"), "naive");
  EXPECT_TRUE(json[0].at("gpu_us").is_number());
  EXPECT_DOUBLE_EQ(json[1].at("gpu_us").get<double>(), 94.5);
  EXPECT_TRUE(json[3].at("gpu_us").is_null());
  EXPECT_EQ(json[2].at("note"), "two\nlines");
  for (const auto& row : json) EXPECT_EQ(row.size(), table_.columns.size());
}

TEST_F(TableFiles, MarkdownHasOneLinePerRowAndEscapedCells) {
  const auto lines = lines_of(file(".md"));
  ASSERT_EQ(lines.size(), table_.rows.size() + 2);  // header + delimiter + rows
  EXPECT_EQ(parse_markdown_row(lines[0]), (std::vector<std::string>{"variant", "GPU µs", "note"}));
  const auto delimiter = parse_markdown_row(lines[1]);
  ASSERT_EQ(delimiter.size(), 3u);
  EXPECT_EQ(delimiter[0].find(':'), std::string::npos);
  EXPECT_EQ(delimiter[1].back(), ':') << "numeric column is right-aligned";
  for (size_t r = 0; r < kShown.size(); ++r) {
    auto expected = kShown[r];
    for (auto& cell : expected)
      if (auto nl = cell.find('\n'); nl != std::string::npos) cell.replace(nl, 1, "<br>");
    EXPECT_EQ(parse_markdown_row(lines[r + 2]), expected);
  }
}

TEST_F(TableFiles, TextIsAlignedInColumns) {
  const auto lines = lines_of(file(".txt"));
  ASSERT_EQ(lines.size(), table_.rows.size() + 2);
  EXPECT_EQ(lines[0].rfind("variant", 0), 0u);
  EXPECT_EQ(lines[1].find_first_not_of("- "), std::string::npos);
  // Every row's "GPU µs" cell ends where the header's does (right-aligned).
  const size_t header_end = lines[0].find("GPU µs") + std::string("GPU µs").size();
  EXPECT_EQ(lines[2].find("1062.0") + 6, header_end - 1);  // µ is two bytes, one column
  EXPECT_EQ(lines[3].find("94.5") + 4, header_end - 1);
  EXPECT_NE(lines[4].find("two lines"), std::string::npos);
  EXPECT_NE(lines[5].find("n/a"), std::string::npos);
  for (const auto& line : lines) EXPECT_NE(line.back(), ' ') << "no trailing spaces";
}

Table text_table(std::vector<std::string> keys, std::vector<std::vector<Cell>> rows) {
  Table t;
  for (auto& k : keys) t.columns.push_back(text_column(k, k));
  t.rows = std::move(rows);
  return t;
}

TEST(TableWriters, CsvQuotesOnlyWhatNeedsIt) {
  const Table t = text_table({"a", "b"}, {{"plain", "x,y"}, {"say \"hi\"", "cr\rlf"}});
  EXPECT_EQ(to_csv(t), "a,b\nplain,\"x,y\"\n\"say \"\"hi\"\"\",\"cr\rlf\"\n");
}

TEST(TableWriters, NumbersShowByTheirColumnsFormat) {
  using S = NumberFormat::Style;
  Table t;
  t.columns = {number_column("g", "g", {S::general, 3}), number_column("f", "f", {S::fixed, 1}),
               number_column("x", "x", {S::ratio, 2}), number_column("p", "p", {S::percent, 1}),
               number_column("b", "b", {S::bytes, 0}), number_column("t", "t", {S::time_us, 0})};
  t.rows = {{98.94, 1062.04, 10.0, 1.6, 528.0 * (1 << 20), 1500.0}};
  const std::vector<std::string> shown = {"98.9", "1062.0", "10.00x", "1.6%", "528.00 MiB", "1.500ms"};
  for (size_t c = 0; c < shown.size(); ++c) EXPECT_EQ(display(t, c, t.rows[0][c]), shown[c]);
  EXPECT_EQ(to_csv(t), "g,f,x,p,b,t\n98.94,1062.04,10,1.6,553648128,1500\n");
  t.missing = "";
  EXPECT_EQ(display(t, 0, Cell{}), "");
  // NaN and infinities are not numbers a reader can use: missing, null in JSON.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(number_cell(std::nan(""))));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(number_cell(std::nullopt)));
  Table inf;
  inf.columns = {number_column("v", "v")};
  inf.rows = {{std::numeric_limits<double>::infinity()}};
  EXPECT_TRUE(to_json(inf)[0]["v"].is_null());
}

TEST(TableWriters, TitleHeadsTextAndMarkdownFiles) {
  const std::string dir = std::filesystem::temp_directory_path() / "attnprof_table_title";
  std::filesystem::create_directories(dir);
  write_table_files(text_table({"a"}, {{"x"}}), dir + "/t", "the title");
  EXPECT_EQ(read_all(dir + "/t.txt").rfind("the title\n\na\n", 0), 0u);
  EXPECT_EQ(read_all(dir + "/t.md").rfind("**the title**\n\n| a ", 0), 0u);
  EXPECT_EQ(read_all(dir + "/t.csv"), "a\nx\n");
  std::filesystem::remove_all(dir);
}

TEST(TableWriters, RaggedRowsAreRejected) {
  const Table t = text_table({"a", "b"}, {{"only one"}});
  EXPECT_THROW(to_text(t), std::invalid_argument);
  EXPECT_THROW(to_csv(t), std::invalid_argument);
  EXPECT_THROW(to_markdown(t), std::invalid_argument);
  EXPECT_THROW(to_json(t), std::invalid_argument);
}

TEST(TableWriters, DuplicateColumnsAreRejectedByJson) {
  const Table t = text_table({"x", "x"}, {{"1", "2"}});
  EXPECT_THROW(to_json(t), std::invalid_argument);
  EXPECT_NO_THROW(to_csv(t));
}

TEST(TableWriters, EmptyTableHasHeaderOnly) {
  const Table t = text_table({"variant", "time"}, {});
  EXPECT_EQ(to_csv(t), "variant,time\n");
  EXPECT_EQ(to_json(t), nlohmann::json::array());
  EXPECT_EQ(lines_of(to_markdown(t)).size(), 2u);
  EXPECT_EQ(lines_of(to_text(t)).size(), 2u);
}

}  // namespace
}  // namespace attnprof::report
