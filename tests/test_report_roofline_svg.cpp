// The roofline picture from recorded counter data (tests/data/counters, the
// values constructed by hand): parsed back, one dot per kernel that has FLOPs
// and DRAM bytes, at the place its figures say, the roofs from the ceilings,
// the rest listed as not drawn.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "attnprof/io/files.h"
#include "attnprof/report/roofline_svg.h"
#include "counters_test_data.h"
#include "test_util.h"
#include "xml_checker.h"

using namespace attnprof;
using namespace attnprof::report;
using attnprof::testing::constructed_runs;
using attnprof::testing::XmlChecker;

namespace {

using attnprof::testing::Element;

std::vector<Element> with_class(const std::vector<Element>& all, const std::string& cls) {
  std::vector<Element> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto it = all[i].attributes.find("class");
    if (it == all[i].attributes.end() || it->second != cls) continue;
    out.push_back(all[i]);
    // The tooltip: its <title> child's text, kept as the element's text.
    if (i + 1 < all.size() && all[i + 1].name == "title" && all[i + 1].parent == int(i)) out.back().text = all[i + 1].text;
  }
  return out;
}

}  // namespace

TEST(Roofline, DotsForKernelsWithFlopsAndBytesTheRestListed) {
  const std::vector<RunRecord> runs = constructed_runs();
  const Roofline rf = roofline_of(runs, roofline_title(runs));
  ASSERT_EQ(rf.runs, (std::vector<std::string>{"naive", "sdpa-math", "sdpa-flash", "custom-flash-sm90"}));
  size_t kernels = 0;
  for (const RunRecord& r : runs) kernels += r.counters->kernels.size();
  EXPECT_EQ(rf.dots.size() + rf.not_drawn.size(), kernels);
  EXPECT_EQ(rf.dots.size(), 10u);  // naive 4, sdpa-math 4, one fused kernel each
  for (const std::string& line : rf.not_drawn) EXPECT_NE(line.find("no FLOPs counted"), std::string::npos) << line;
  // Shares add up to one per run.
  std::map<size_t, double> share;
  for (const RooflineDot& d : rf.dots) share[d.run] += d.share;
  EXPECT_NEAR(share[2], 1.0, 1e-12);
  EXPECT_NEAR(share[3], 1.0, 1e-12);
  EXPECT_LT(share[0], 1.0) << "masked_fill is not drawn";
  // Roofs: the bf16 and fp32 GEMM ceilings and the copy slope.
  ASSERT_EQ(rf.roofs.size(), 2u);
  EXPECT_EQ(rf.roofs[0].label, "bf16 GEMM 700 TFLOP/s");
  EXPECT_EQ(rf.roofs[1].label, "fp32 GEMM 50.0 TFLOP/s");
  EXPECT_DOUBLE_EQ(*rf.dram_gbps, 4000.0);
  // The sdpa-math GEMMs count no FLOPs: analytic, drawn hollow.
  size_t analytic = 0;
  for (const RooflineDot& d : rf.dots) analytic += d.analytic;
  EXPECT_EQ(analytic, 2u);
}

TEST(Roofline, SvgParsesBackWithOneCirclePerDotWhereTheFiguresSay) {
  const std::vector<RunRecord> runs = constructed_runs();
  const Roofline rf = roofline_of(runs, roofline_title(runs));
  const std::string svg = render_roofline_svg(rf);
  const auto all = XmlChecker(svg).parse();
  const auto dots = with_class(all, "dot");
  ASSERT_EQ(dots.size(), rf.dots.size());
  // Each dot names its run and kernel; no kernel of a run twice.
  std::map<std::string, int> seen;
  for (const auto& d : dots) ++seen[d.attributes.at("data-run") + "|" + d.attributes.at("data-kernel")];
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1) << key;
  // One colour per run, and the same colour for every dot of a run.
  std::map<std::string, std::string> colour;
  for (const auto& d : dots) {
    const std::string c = d.attributes.at("fill") == "white" ? d.attributes.at("stroke") : d.attributes.at("fill");
    auto [it, added] = colour.emplace(d.attributes.at("data-run"), c);
    EXPECT_EQ(it->second, c) << d.attributes.at("data-run");
  }
  EXPECT_EQ(colour.size(), 4u);
  // Log-log placement: x pixel grows with FLOP/byte, y pixel falls with TFLOP/s.
  std::vector<std::pair<double, double>> pix;
  for (const auto& d : dots) pix.emplace_back(std::stod(d.attributes.at("cx")), std::stod(d.attributes.at("cy")));
  // Dots are drawn largest first: pair them by their tooltip's label.
  for (size_t i = 0; i < dots.size(); ++i)
    for (size_t j = 0; j < dots.size(); ++j) {
      const RooflineDot* a = nullptr;
      const RooflineDot* b = nullptr;
      for (const RooflineDot& d : rf.dots) {
        if (dots[i].text.rfind(d.label + "\n" + d.kernel + "\n", 0) == 0) a = &d;
        if (dots[j].text.rfind(d.label + "\n" + d.kernel + "\n", 0) == 0) b = &d;
      }
      ASSERT_TRUE(a && b) << dots[i].text;
      if (a->flop_per_byte < b->flop_per_byte * 0.99) {
        EXPECT_LT(pix[i].first, pix[j].first);
      }
      if (a->tflops < b->tflops * 0.99) {
        EXPECT_GT(pix[i].second, pix[j].second);
      }
      // Area by share; radii are written to 0.1 px, so close shares may draw alike.
      const double ri = std::stod(dots[i].attributes.at("r")), rj = std::stod(dots[j].attributes.at("r"));
      if (a->share > b->share + 0.05) {
        EXPECT_GT(ri, rj);
      } else if (a->share > b->share) {
        EXPECT_GE(ri, rj);
      }
    }
  // The roofs: a slope and two flat ones; the labels and the legend.
  EXPECT_EQ(with_class(all, "roof slope").size(), 1u);
  EXPECT_EQ(with_class(all, "roof").size(), 2u);
  EXPECT_TRUE(attnprof::testing::has_text(all, "bf16 GEMM 700 TFLOP/s"));
  EXPECT_TRUE(attnprof::testing::has_text(all, "DRAM copy 4000 GB/s"));
  for (const char* run : {"naive", "sdpa-math", "sdpa-flash", "custom-flash-sm90"})
    EXPECT_TRUE(attnprof::testing::has_text(all, run)) << run;
  EXPECT_EQ(with_class(all, "not-drawn-kernel").size(), rf.not_drawn.size());
  // Labels are "run · kernel symbol" and never overlap (placed greedily, else left to the tooltip).
  const auto labels = with_class(all, "dot-label");
  EXPECT_GE(labels.size(), 6u);
  EXPECT_TRUE(attnprof::testing::has_text(all, "sdpa-flash \u00b7 flash_fwd_kernel"));
  EXPECT_TRUE(attnprof::testing::has_text(all, "custom-flash-sm90 \u00b7 flash_fwd_sm90_kernel"));
  // The bf16 roof sits where 700 TFLOP/s is: above every dot.
  double roof_y = 0;
  for (const auto& r : with_class(all, "roof"))
    if (r.text == "bf16 GEMM 700 TFLOP/s") roof_y = std::stod(r.attributes.at("y1"));
  for (const auto& [x, y] : pix) EXPECT_GT(y, roof_y);
}

TEST(Roofline, WithoutCeilingsNoRoofsAndRunsWithoutCountersLeftOut) {
  std::vector<RunRecord> runs = constructed_runs(false);
  runs[1].counters->state = CounterPass::State::unavailable;
  RunRecord cpu;
  cpu.variant = "inplace";
  runs.push_back(cpu);
  const Roofline rf = roofline_of(runs, "t");
  EXPECT_TRUE(rf.roofs.empty());
  EXPECT_FALSE(rf.dram_gbps);
  EXPECT_EQ(rf.runs, (std::vector<std::string>{"naive", "sdpa-flash", "custom-flash-sm90"}));
  const auto all = XmlChecker(render_roofline_svg(rf)).parse();
  EXPECT_TRUE(with_class(all, "roof").empty());
  EXPECT_EQ(with_class(all, "dot").size(), rf.dots.size());
  // Nothing counted anywhere: nothing staged.
  io::StagedFiles files;
  EXPECT_FALSE(stage_roofline(files, {cpu}, "/nonexistent/x.svg"));
  EXPECT_TRUE(files.empty());
}

TEST(Roofline, EveryVariantOfVariantAllHasItsOwnColour) {
  // Ten runs, as --variant all draws: ten legend entries, ten colours.
  std::vector<RunRecord> runs;
  for (int i = 0; i < 10; ++i) {
    RunRecord r = constructed_runs()[2];  // one fused kernel
    r.variant = "v" + std::to_string(i);
    runs.push_back(r);
  }
  const auto all = XmlChecker(render_roofline_svg(roofline_of(runs, "ten"))).parse();
  std::set<std::string> fills;
  for (const Element& e : all)
    if (e.name == "circle" && e.attributes.count("class") == 0 && e.attributes.count("fill") &&
        e.attributes.at("fill") != "white")
      fills.insert(e.attributes.at("fill"));
  EXPECT_EQ(fills.size(), 10u);
}

TEST(Roofline, HostileNamesStayWellFormed) {
  std::vector<RunRecord> runs = constructed_runs();
  runs[0].variant = "a<b>&\"c\"\x01";
  runs[0].counters->kernels[0].kernel = "k<&>\x02";
  EXPECT_NO_THROW(XmlChecker(render_roofline_svg(roofline_of(runs, "<title> & \"q\""))).parse());
}

TEST(Roofline, StagedWithTheRunsFiles) {
  const std::string d = attnprof::testing::make_temp_dir("roofline");
  ASSERT_FALSE(d.empty());
  const std::vector<RunRecord> runs = constructed_runs();
  io::StagedFiles files;
  ASSERT_TRUE(stage_roofline(files, runs, d + "/r.svg"));
  files.publish();
  const auto all = XmlChecker(io::read_file(d + "/r.svg")).parse();
  EXPECT_EQ(with_class(all, "dot").size(), 10u);
  EXPECT_EQ(roofline_title(runs),
            "attnprof roofline: every kernel of one forward, 8x16x1024x64 bf16 causal on cuda:0 (NVIDIA H200 "
            "(constructed test data))");
  attnprof::testing::remove_tree(d);
}
