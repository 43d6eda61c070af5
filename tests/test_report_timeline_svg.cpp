#include "attnprof/report/timeline_svg.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "attnprof/report/fingerprint.h"
#include "trace_test_util.h"
#include "xml_checker.h"

namespace attnprof::report {
namespace {

using nlohmann::json;
using testing::Element;
using testing::XmlChecker;

struct ParsedRow {
  std::map<std::string, std::string> attributes;
  std::vector<Element> boxes;  // <rect class="box ...">
  std::vector<std::string> box_titles;  // each box's <title> tooltip
  std::vector<std::string> texts;
};

struct ParsedSvg {
  std::vector<Element> all;
  std::vector<ParsedRow> rows;
  double axis_left = 0, axis_right = 0;
};

bool has_class(const Element& e, const std::string& cls) {
  const auto it = e.attributes.find("class");
  if (it == e.attributes.end()) return false;
  const std::string padded = " " + it->second + " ";
  return padded.find(" " + cls + " ") != std::string::npos;
}

// Parses the picture back (well-formedness included) and checks what every
// picture must be: one <svg> root, no script, no link to anything outside.
ParsedSvg parse_svg(const std::string& svg) {
  ParsedSvg p;
  p.all = XmlChecker(svg).parse();
  EXPECT_EQ(p.all.front().name, "svg");
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_EQ(svg.find("href"), std::string::npos);
  EXPECT_EQ(svg.find("url("), std::string::npos);
  EXPECT_EQ(svg.find("@import"), std::string::npos);
  for (size_t i = 0; i < p.all.size(); ++i) {
    const Element& e = p.all[i];
    for (const auto& [name, value] : e.attributes) EXPECT_NE(name.rfind("on", 0), 0u) << "event handler " << name;
    if (e.name == "line" && has_class(e, "axis")) {
      p.axis_left = std::stod(e.attributes.at("x1"));
      p.axis_right = std::stod(e.attributes.at("x2"));
    }
    if (e.name == "g" && has_class(e, "row")) {
      ParsedRow row;
      row.attributes = e.attributes;
      for (size_t d : testing::descendants(p.all, i)) {
        const Element& x = p.all[d];
        if (x.name == "rect" && has_class(x, "box")) {
          row.boxes.push_back(x);
          row.box_titles.emplace_back();
        }
        if (x.name == "title" && x.parent >= 0 && has_class(p.all[static_cast<size_t>(x.parent)], "box"))
          row.box_titles.back() = x.text;
        if (x.name == "text") row.texts.push_back(x.text);
      }
      p.rows.push_back(std::move(row));
    }
  }
  EXPECT_LT(p.axis_left, p.axis_right) << "the picture has a time axis";
  return p;
}

void expect_boxes_within_axis(const ParsedSvg& p) {
  for (const ParsedRow& r : p.rows)
    for (const Element& b : r.boxes) {
      const double x = std::stod(b.attributes.at("x")), w = std::stod(b.attributes.at("width"));
      EXPECT_GE(x, p.axis_left - 0.05);
      EXPECT_LE(x + w, p.axis_right + 0.05);
      EXPECT_GT(w, 0.0);
    }
}

// The H200 run: one row per variant, as many boxes as attnprof counted
// kernels, memcpys and memsets in a forward (its summary), all on the axis.
TEST(TimelineSvg, RealRunsShowEachForwardsDeviceWork) {
  const auto& variants = testing::gpu_fixture_variants();
  std::vector<KinetoTrace> traces;
  for (const auto& v : variants) traces.push_back(read_kineto_trace_file(testing::gpu_fixture(v)));
  Timeline tl;
  tl.title = "attnprof: one forward per variant, 1x2x128x64 bf16 causal on NVIDIA H200";
  for (size_t i = 0; i < variants.size(); ++i) tl.rows.push_back(timeline_row({variants[i], "", "", &traces[i]}));
  const std::string svg = render_timeline_svg(tl);
  const ParsedSvg p = parse_svg(svg);
  ASSERT_EQ(p.rows.size(), variants.size());
  expect_boxes_within_axis(p);
  for (size_t i = 0; i < variants.size(); ++i) {
    SCOPED_TRACE(variants[i]);
    const int64_t expected = testing::summary_kernels_per_forward(testing::gpu_fixture(variants[i], ".summary.json"));
    EXPECT_EQ(static_cast<int64_t>(p.rows[i].boxes.size()), expected);
    EXPECT_EQ(p.rows[i].attributes.at("data-items"), std::to_string(expected));
    EXPECT_EQ(p.rows[i].attributes.at("data-variant"), variants[i]);
    const std::string count = std::to_string(expected) + (expected == 1 ? " kernel/fwd" : " kernels/fwd");
    bool labelled = false;
    for (const auto& t : p.rows[i].texts) labelled |= t.find(count) == 0;
    EXPECT_TRUE(labelled) << "row label says " << count;
  }
  // naive's DtoD copy and cuDNN's memset are marked, and the legend says so.
  size_t copies = 0, sets = 0;
  for (const ParsedRow& r : p.rows)
    for (const Element& b : r.boxes) {
      copies += has_class(b, "memcpy");
      sets += has_class(b, "memset");
    }
  EXPECT_EQ(copies, 1u);
  EXPECT_EQ(sets, 1u);
  EXPECT_TRUE(testing::has_text(p.all, "Memcpy"));
  EXPECT_TRUE(testing::has_text(p.all, "Memset"));
  EXPECT_TRUE(testing::has_text(p.all, tl.title));
  EXPECT_TRUE(testing::has_text(p.all, "\u00b5s from each forward's first kernel"));
  // sdpa-flash's kernel is ~5 µs against sdpa-math's ~335 µs forward: too
  // narrow for a label here, its name is in the tooltip.
  const std::string flash_name = traces[3].name_of(traces[3].slices[find_forwards(traces[3]).front().device_work[0]]);
  EXPECT_EQ(p.rows[3].box_titles.at(0).rfind(flash_name + "\n", 0), 0u);
  for (const auto& t : p.rows[3].texts) EXPECT_EQ(t.find("flash_fwd_kernel"), std::string::npos) << t;
  // On its own the kernel spans the axis and carries "<symbol> <duration>".
  Timeline alone;
  alone.rows.push_back(timeline_row({"sdpa-flash", "", "", &traces[3]}));
  const ParsedSvg q = parse_svg(render_timeline_svg(alone));
  bool labelled_box = false;
  for (const auto& t : q.rows[0].texts) labelled_box |= t.rfind("flash_fwd_kernel ", 0) == 0 && t.find(" \u00b5s") != std::string::npos;
  EXPECT_TRUE(labelled_box);
}

// Colours follow the kernel family, in every row: the same family the same
// fill, memcpy and memset fills that no kernel has.
TEST(TimelineSvg, ColoursAreStableByFamily) {
  const auto traces = std::vector<KinetoTrace>{read_kineto_trace_file(testing::gpu_fixture("naive")),
                                               read_kineto_trace_file(testing::gpu_fixture("sdpa-math"))};
  Timeline tl;
  tl.rows = {timeline_row({"naive", "", "", &traces[0]}), timeline_row({"sdpa-math", "", "", &traces[1]})};
  const ParsedSvg p = parse_svg(render_timeline_svg(tl));
  std::map<std::string, std::string> fill_of_family;
  std::set<std::string> kernel_fills, other_fills;
  for (size_t r = 0; r < tl.rows.size(); ++r) {
    ASSERT_EQ(p.rows[r].boxes.size(), tl.rows[r].boxes.size());
    for (size_t b = 0; b < tl.rows[r].boxes.size(); ++b) {
      const TimelineBox& box = tl.rows[r].boxes[b];
      const std::string fill = p.rows[r].boxes[b].attributes.at("fill");
      const std::string family(family_name(fingerprint_kernel(box.name).family));
      const auto [it, added] = fill_of_family.emplace(family, fill);
      EXPECT_EQ(it->second, fill) << family;
      (box.kind == BoxKind::kernel ? kernel_fills : other_fills).insert(fill);
    }
  }
  EXPECT_GE(fill_of_family.size(), 4u);
  for (const auto& f : other_fills) EXPECT_FALSE(kernel_fills.count(f)) << f;
}

TEST(TimelineSvg, CpuRunsShowTheOpsUnderAttnFwd) {
  const auto& variants = testing::cpu_fixture_variants();
  std::vector<KinetoTrace> traces;
  for (const auto& v : variants) traces.push_back(read_kineto_trace_file(testing::cpu_fixture(v)));
  Timeline tl;
  for (size_t i = 0; i < variants.size(); ++i) tl.rows.push_back(timeline_row({variants[i], "", "", &traces[i]}));
  const std::string svg = render_timeline_svg(tl);
  const ParsedSvg p = parse_svg(svg);
  expect_boxes_within_axis(p);
  EXPECT_NE(svg.find("CPU-only runs have no kernels"), std::string::npos);
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_TRUE(tl.rows[i].cpu_ops);
    const auto forwards = find_forwards(traces[i]);
    // The median by CPU time holds as many ops as this row shows.
    std::vector<int64_t> times;
    for (const Forward& f : forwards) times.push_back(traces[i].slices[f.annotation].dur_ns);
    std::sort(times.begin(), times.end());
    EXPECT_EQ(tl.rows[i].forward_ns, times[(times.size() - 1) / 2]);
    size_t ops = 0;
    for (const Forward& f : forwards)
      if (traces[i].slices[f.annotation].dur_ns == tl.rows[i].forward_ns) ops = child_slices(traces[i], f.annotation).size();
    EXPECT_EQ(p.rows[i].boxes.size(), ops);
    for (const Element& b : p.rows[i].boxes) EXPECT_TRUE(has_class(b, "cpu-op"));
  }
}

// The median forward by summed device time (lower median of an even count),
// drawn from its first kernel; both ways of tying work to forwards agree.
TEST(TimelineSvg, MedianForwardFromItsFirstKernel) {
  const json j = testing::synthetic_trace({{{"a", 10.0}}, {{"b", 30.0}, {"b2", 1.0}}, {{"c", 20.0}}, {{"d", 40.0}}});
  for (bool strip_runtime : {false, true}) {
    SCOPED_TRACE(strip_runtime ? "gpu_user_annotation spans" : "correlation ids");
    json copy = j;
    if (strip_runtime) {
      json kept = json::array();
      for (const auto& e : copy["traceEvents"])
        if (e.value("cat", "") != "cuda_runtime") kept.push_back(e);
      copy["traceEvents"] = kept;
    }
    const KinetoTrace t = parse_kineto_trace(copy.dump(), "median");
    const TimelineRow row = timeline_row({"v", "", "", &t});
    EXPECT_EQ(row.forwards, 4u);
    ASSERT_EQ(row.boxes.size(), 1u);
    EXPECT_EQ(row.boxes[0].name, "c") << "device sums 10, 31, 20, 40: lower median 20";
    EXPECT_EQ(row.boxes[0].start_ns, 0);
    EXPECT_EQ(row.forward_ns, 20000);
  }
}

// Kernel names with markup characters are escaped: the picture parses and
// the tooltip reads back the name as it was.
TEST(TimelineSvg, NamesAreEscaped) {
  const std::string nasty = "void k<\"a\" & 'b'>(x<y>, z&&w)</title><script>alert(1)</script>";
  const json j = testing::synthetic_trace({{{nasty, 200.0}, {"Memcpy DtoD (Device -> Device)", 1.0, "gpu_memcpy"}}});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "escape");
  Timeline tl;
  tl.title = "<b>\"title\" & co</b>";
  tl.rows.push_back(timeline_row({"var<iant>", "A&B", "", &t}));
  const std::string svg = render_timeline_svg(tl);
  const ParsedSvg p = parse_svg(svg);
  ASSERT_EQ(p.rows.size(), 1u);
  ASSERT_EQ(p.rows[0].boxes.size(), 2u);
  EXPECT_EQ(p.rows[0].attributes.at("data-variant"), "var<iant>");
  EXPECT_EQ(p.rows[0].box_titles[0].rfind(nasty + "\n", 0), 0u) << p.rows[0].box_titles[0];
  EXPECT_TRUE(testing::has_text(p.all, tl.title));
  bool label = false;
  for (const auto& text : p.rows[0].texts) label |= text.rfind("k ", 0) == 0;
  EXPECT_TRUE(label) << "the wide box's label is the symbol without template arguments";
}

// Two runs under compare: a row per run, grouped per variant.
TEST(TimelineSvg, CompareShowsARowPerRun) {
  const auto a = read_kineto_trace_file(testing::gpu_fixture("naive"));
  const auto b = read_kineto_trace_file(testing::gpu_fixture("sdpa-flash"));
  Timeline tl;
  tl.rows = {timeline_row({"attention", "A", "", &a}), timeline_row({"attention", "B", "", &b})};
  const ParsedSvg p = parse_svg(render_timeline_svg(tl));
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(p.rows[0].attributes.at("data-run"), "A");
  EXPECT_EQ(p.rows[1].attributes.at("data-run"), "B");
  EXPECT_EQ(p.rows[0].boxes.size(), 6u);
  EXPECT_EQ(p.rows[1].boxes.size(), 1u);
  EXPECT_TRUE(testing::has_text(p.all, "attention \u00b7 A"));
  EXPECT_TRUE(testing::has_text(p.all, "attention \u00b7 B"));
}

// A forward of 2,500 kernels: the row draws the first kMaxTimelineBoxes and
// says so; the file stays small. No attn_fwd: a TraceError naming the file.
TEST(TimelineSvg, HugeAndEmptyTraces) {
  const json j = testing::synthetic_trace({std::vector<testing::SynthWork>(2500, {"k", 0.2})});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "huge");
  Timeline tl;
  tl.rows.push_back(timeline_row({"v", "", "", &t}));
  EXPECT_EQ(tl.rows[0].work_items, 2500u);
  const std::string svg = render_timeline_svg(tl);
  EXPECT_LT(svg.size(), size_t(2) << 20);
  const ParsedSvg p = parse_svg(svg);
  EXPECT_EQ(p.rows[0].boxes.size(), kMaxTimelineBoxes);
  expect_boxes_within_axis(p);
  EXPECT_NE(svg.find("(first 2000 shown)"), std::string::npos);

  const KinetoTrace none = parse_kineto_trace(R"({"traceEvents":[]})", "none.json");
  try {
    (void)timeline_row({"v", "", "", &none});
    ADD_FAILURE() << "no error";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("none.json"), std::string::npos);
  }
  EXPECT_NO_THROW(parse_svg(render_timeline_svg(Timeline{})));
}

}  // namespace
}  // namespace attnprof::report
