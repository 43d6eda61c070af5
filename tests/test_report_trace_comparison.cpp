#include "attnprof/report/trace_comparison.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "perfetto_rules.h"
#include "test_util.h"
#include "trace_test_util.h"
#include "xml_checker.h"

namespace attnprof::report {
namespace {

// Both files written under compare/, each read back: the trace gunzips into a
// Perfetto-valid trace with a process per readable run, the picture parses
// with a row per readable run; the broken runs are notes, not failures.
TEST(TraceComparison, WritesBothFilesAndNotesTheRunsLeftOut) {
  const std::string dir = testing::make_temp_dir("trace_comparison");
  io::write_file_atomic(dir + "/truncated.json.gz", io::read_file(testing::gpu_fixture("naive")).substr(0, 100));
  std::vector<RunTraceFile> runs;
  for (const auto& v : testing::gpu_fixture_variants()) runs.push_back({v, "", "x µs/forward", testing::gpu_fixture(v)});
  runs.push_back({"broken", "", "", dir + "/truncated.json.gz"});
  runs.push_back({"missing", "B", "", dir + "/missing.json.gz"});

  const ComparisonFiles files = write_trace_comparison(runs, dir, "1_2_128_64_bf16", "title");
  EXPECT_EQ(files.trace_path, dir + "/compare/1_2_128_64_bf16.trace.json.gz");
  EXPECT_EQ(files.timeline_path, dir + "/compare/1_2_128_64_bf16.timeline.svg");
  ASSERT_EQ(files.notes.size(), 2u);
  EXPECT_EQ(files.notes[0].rfind("broken: left out of the comparison: " + dir + "/truncated.json.gz: ", 0), 0u) << files.notes[0];
  EXPECT_EQ(files.notes[1].rfind("missing (B): left out", 0), 0u) << files.notes[1];

  const nlohmann::json trace = testing::load_json(files.trace_path);
  for (const std::string& v : testing::perfetto_rule_violations(trace)) ADD_FAILURE() << v;
  EXPECT_EQ(trace["attnprof_comparison"]["runs"].size(), testing::gpu_fixture_variants().size());
  const auto svg = testing::XmlChecker(io::read_file(files.timeline_path)).parse();
  size_t rows = 0;
  for (const auto& e : svg) rows += e.name == "g" && e.attributes.count("data-variant");
  EXPECT_EQ(rows, testing::gpu_fixture_variants().size());
  for (const auto& p : testing::list_tree(dir + "/compare"))
    EXPECT_EQ(p.find("/."), std::string::npos) << "no temporary file left: " << p;

  // Nothing readable: an error, and no file.
  const std::string empty = testing::make_temp_dir("trace_comparison_none");
  EXPECT_THROW(write_trace_comparison({{"broken", "", "", dir + "/truncated.json.gz"}}, empty, "s", "t"), TraceError);
  EXPECT_FALSE(testing::path_exists(empty + "/compare"));
  testing::remove_tree(dir);
  testing::remove_tree(empty);
}

}  // namespace
}  // namespace attnprof::report
