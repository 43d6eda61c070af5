// The writers are tested by writing to a temp dir and parsing the files back.
#include "attnprof/report/table_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace attnprof::report {
namespace {

using Rows = std::vector<std::vector<std::string>>;

Table awkward_table() {
  Table t;
  t.columns = {"variant", "GPU µs", "note"};
  t.numeric = {false, true, false};
  t.rows = {{"naive", "1062.0", "DtoD Memcpy, mask \"materialised\""},
            {"sdpa-flash", "94.5", "pipe | inside"},
            {"sdpa-cudnn", "58.6", "two\nlines"},
            {"", "", ""}};
  return t;
}

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

TEST_F(TableFiles, CsvParsesBackToTheSameCells) {
  const Rows records = parse_csv(file(".csv"));
  ASSERT_EQ(records.size(), table_.rows.size() + 1);
  EXPECT_EQ(records.front(), table_.columns);
  for (size_t r = 0; r < table_.rows.size(); ++r) EXPECT_EQ(records[r + 1], table_.rows[r]);
}

TEST_F(TableFiles, JsonParsesBackToObjectsKeyedByColumn) {
  const auto json = nlohmann::json::parse(file(".json"));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), table_.rows.size());
  for (size_t r = 0; r < table_.rows.size(); ++r) {
    ASSERT_EQ(json[r].size(), table_.columns.size());
    for (size_t c = 0; c < table_.columns.size(); ++c)
      EXPECT_EQ(json[r].at(table_.columns[c]).get<std::string>(), table_.rows[r][c]);
  }
}

TEST_F(TableFiles, MarkdownHasOneLinePerRowAndEscapedCells) {
  const auto lines = lines_of(file(".md"));
  ASSERT_EQ(lines.size(), table_.rows.size() + 2);  // header + delimiter + rows
  EXPECT_EQ(parse_markdown_row(lines[0]), table_.columns);
  const auto delimiter = parse_markdown_row(lines[1]);
  ASSERT_EQ(delimiter.size(), 3u);
  EXPECT_EQ(delimiter[0].find(':'), std::string::npos);
  EXPECT_EQ(delimiter[1].back(), ':') << "numeric column is right-aligned";
  for (size_t r = 0; r < table_.rows.size(); ++r) {
    auto expected = table_.rows[r];
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
  for (const auto& line : lines) EXPECT_NE(line.back(), ' ') << "no trailing spaces";
}

TEST(TableWriters, CsvQuotesOnlyWhatNeedsIt) {
  Table t{{"a", "b"}, {{"plain", "x,y"}, {"say \"hi\"", "cr\rlf"}}, {}};
  EXPECT_EQ(to_csv(t), "a,b\nplain,\"x,y\"\n\"say \"\"hi\"\"\",\"cr\rlf\"\n");
}

TEST(TableWriters, RaggedRowsAreRejected) {
  Table t{{"a", "b"}, {{"only one"}}, {}};
  EXPECT_THROW(to_text(t), std::invalid_argument);
  EXPECT_THROW(to_csv(t), std::invalid_argument);
  EXPECT_THROW(to_markdown(t), std::invalid_argument);
  EXPECT_THROW(to_json(t), std::invalid_argument);
}

TEST(TableWriters, DuplicateColumnsAreRejectedByJson) {
  Table t{{"x", "x"}, {{"1", "2"}}, {}};
  EXPECT_THROW(to_json(t), std::invalid_argument);
  EXPECT_NO_THROW(to_csv(t));
}

TEST(TableWriters, EmptyTableHasHeaderOnly) {
  Table t{{"variant", "time"}, {}, {}};
  EXPECT_EQ(to_csv(t), "variant,time\n");
  EXPECT_EQ(to_json(t), nlohmann::json::array());
  EXPECT_EQ(lines_of(to_markdown(t)).size(), 2u);
  EXPECT_EQ(lines_of(to_text(t)).size(), 2u);
}

}  // namespace
}  // namespace attnprof::report
