// The ring report: interval arithmetic, compute/communication overlap from a
// trace's kernel intervals (hand-built two-stream traces with known answers),
// the per-rank figures' JSON, and rank 0's table, headline and files.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "attnprof/report/ring_report.h"
#include "attnprof/report/summary.h"

using namespace attnprof;
using namespace attnprof::report;
using nlohmann::json;

namespace {

TEST(RingIntervals, UnionAndUncoveredTime) {
  EXPECT_EQ(union_ns({}), 0);
  EXPECT_EQ(union_ns({{0, 10}, {5, 15}, {20, 30}, {30, 31}, {7, 7}}), 26);  // overlap, touch, empty
  EXPECT_EQ(uncovered_ns({{0, 100}}, {}), 100);
  EXPECT_EQ(uncovered_ns({{0, 100}}, {{10, 20}, {15, 30}, {90, 200}}), 100 - 20 - 10);
  EXPECT_EQ(uncovered_ns({{0, 10}, {50, 60}}, {{5, 55}}), 5 + 5);
  EXPECT_EQ(uncovered_ns({{10, 20}}, {{0, 10}, {20, 30}}), 10);  // touching covers nothing
  EXPECT_EQ(uncovered_ns({{10, 20}}, {{0, 100}}), 0);
  // Order of the inputs does not matter.
  EXPECT_EQ(uncovered_ns({{50, 60}, {0, 10}}, {{55, 70}, {-5, 2}}), 8 + 5);
}

TEST(RingIntervals, CommunicationKernelsAreNccl) {
  EXPECT_TRUE(is_communication_kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_TRUE(is_communication_kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
  EXPECT_FALSE(is_communication_kernel("attnprof::flash::flash_fwd_kernel<...>"));
  EXPECT_FALSE(is_communication_kernel("void at::native::elementwise_kernel<nccl>"));
}

struct Work {
  std::string name;
  int64_t tid;  // stream
  double ts, dur;  // us
};

// One attn_fwd scope per entry of `forwards` on CPU thread 100; each work item
// launched inside it (cudaLaunchKernel, correlation id) and run on its stream
// at the given time.
json two_stream_trace(const std::vector<std::vector<Work>>& forwards) {
  json events = json::array();
  int64_t corr = 1000;
  double t = 0;
  for (const auto& work : forwards) {
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "attn_fwd"}, {"pid", 100}, {"tid", 100},
                      {"ts", t}, {"dur", 10.0 + 2.0 * double(work.size())}, {"args", {{"External id", 1}}}});
    for (size_t i = 0; i < work.size(); ++i) {
      ++corr;
      events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 100}, {"tid", 100},
                        {"ts", t + 1.0 + 2.0 * double(i)}, {"dur", 1.0}, {"args", {{"correlation", corr}}}});
      events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", work[i].name}, {"pid", 0}, {"tid", work[i].tid},
                        {"ts", t + work[i].ts}, {"dur", work[i].dur}, {"args", {{"correlation", corr}}}});
    }
    t += 10000.0;
  }
  return {{"schemaVersion", 1}, {"traceEvents", events}};
}

KinetoTrace parse(const json& j) { return parse_kineto_trace(j.dump(), "synthetic"); }

TEST(RingOverlap, ExposedCommunicationFromTwoStreams) {
  // Forward 1: compute 20..120 on stream 7 (two kernels), NCCL 30..150 on
  // stream 20: 90 us hidden, 30 exposed. Forward 2: NCCL 20..40 before
  // compute 40..100 starts: all 20 exposed. A kernel of another forward's
  // time would be outside both.
  const auto f = overlap_figures(parse(two_stream_trace({
      {{"flash_fwd_kernel", 7, 20, 60}, {"elementwise_kernel", 7, 80, 40}, {"ncclDevKernel_SendRecv(x)", 20, 30, 120}},
      {{"ncclDevKernel_SendRecv(x)", 20, 20, 20}, {"flash_fwd_kernel", 7, 40, 60}},
  })));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->forwards, 2);
  EXPECT_NEAR(f->compute_us, (100.0 + 60.0) / 2, 1e-9);  // 20..80 + 80..120 merged; 40..100
  EXPECT_NEAR(f->comm_us, (120.0 + 20.0) / 2, 1e-9);
  EXPECT_NEAR(f->exposed_comm_us, (30.0 + 20.0) / 2, 1e-9);
  EXPECT_NEAR(f->span_us, (130.0 + 80.0) / 2, 1e-9);
  ASSERT_TRUE(f->overlap_pct().has_value());
  EXPECT_NEAR(*f->overlap_pct(), 100.0 * (1.0 - 25.0 / 70.0), 1e-9);
}

TEST(RingOverlap, NoCommunicationAndNoDeviceWork) {
  const auto compute_only = overlap_figures(parse(two_stream_trace({{{"flash_fwd_kernel", 7, 0, 50}}})));
  ASSERT_TRUE(compute_only.has_value());
  EXPECT_EQ(compute_only->comm_us, 0.0);
  EXPECT_FALSE(compute_only->overlap_pct().has_value());
  EXPECT_FALSE(overlap_figures(parse(two_stream_trace({{}}))).has_value());  // a CPU run: no device work
}

RankFigures figures(int rank, double forward_us, double compute, double comm, double exposed) {
  RankFigures f;
  f.rank = rank;
  f.device = "cuda:" + std::to_string(rank);
  f.device_name = "NVIDIA H200";
  f.forward_us = forward_us;
  f.overlap = OverlapFigures{3, compute, comm, exposed, compute + exposed};
  return f;
}

TEST(RingFigures, JsonRoundTripAndDefects) {
  RankFigures f = figures(1, 2500.5, 2400, 800, 12.5);
  f.reason = "quote \" and newline \n";
  const RankFigures back = rank_figures_from_json(json::parse(rank_figures_json(f).dump()));
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.device, "cuda:1");
  EXPECT_EQ(back.reason, f.reason);
  EXPECT_EQ(*back.forward_us, 2500.5);
  ASSERT_TRUE(back.overlap);
  EXPECT_EQ(back.overlap->exposed_comm_us, 12.5);
  EXPECT_EQ(back.overlap->forwards, 3);
  RankFigures cpu;
  cpu.device = "cpu";
  const RankFigures cpu_back = rank_figures_from_json(rank_figures_json(cpu));
  EXPECT_FALSE(cpu_back.forward_us);
  EXPECT_FALSE(cpu_back.overlap);
  json bad = rank_figures_json(f);
  bad["overlap"]["comm_us"] = "fast";
  EXPECT_THROW(rank_figures_from_json(bad), std::invalid_argument);
  bad = rank_figures_json(f);
  bad.erase("rank");
  EXPECT_THROW(rank_figures_from_json(bad), std::invalid_argument);
  EXPECT_THROW(rank_figures_from_json(json::array()), std::invalid_argument);
}

RingSummary two_rank_summary() {
  RingSummary s;
  s.variant = "ring-custom-flash";
  s.inner = "custom-flash";
  s.problem.batch = 1, s.problem.heads_q = s.problem.heads_kv = 16;
  s.problem.seq_q = s.problem.seq_kv = 65536, s.problem.head_dim = 128;
  s.problem.device = "cuda:0";
  s.world = 2;
  s.ranks = {figures(0, 20000, 19500, 900, 100), figures(1, 22000, 21000, 950, 110)};
  s.single_gpu_us = 40000;
  s.single_gpu_source = "custom-flash on cuda:0";
  return s;
}

TEST(RingSummaryTable, SpeedupUsesTheSlowestRank) {
  RingSummary s = two_rank_summary();
  EXPECT_EQ(*s.ring_forward_us(), 22000);
  EXPECT_NEAR(*s.speedup(), 40000.0 / 22000.0, 1e-12);
  EXPECT_NEAR(*s.efficiency(), 40000.0 / (2 * 22000.0), 1e-12);
  const Table t = ring_table(s);
  ASSERT_EQ(t.rows.size(), 2u);
  const json rows = to_json(t);
  EXPECT_EQ(rows[1]["rank"], "1");
  EXPECT_NEAR(rows[1]["exposed_pct_of_forward"].get<double>(), 100.0 * 110 / 22000, 1e-9);
  EXPECT_NEAR(rows[1]["overlap_pct"].get<double>(), 100.0 * (1 - 110.0 / 950.0), 1e-9);
  const std::string head = ring_headline(s);
  EXPECT_NE(head.find("1x16x65536x128"), std::string::npos) << head;
  EXPECT_NE(head.find("speed-up 1.82x, parallel efficiency 0.91"), std::string::npos) << head;

  s.ranks[1].forward_us.reset();  // a rank without a time: no ring time, no speed-up
  EXPECT_FALSE(s.ring_forward_us());
  EXPECT_FALSE(s.speedup());
  s = two_rank_summary();
  s.single_gpu_us.reset();
  s.single_gpu_source = "custom-flash skipped: out of memory";
  EXPECT_FALSE(s.efficiency());
  EXPECT_NE(ring_headline(s).find("n/a (custom-flash skipped: out of memory)"), std::string::npos) << ring_headline(s);
}

TEST(RingSummaryTable, FilesParseBack) {
  char templ[] = "/tmp/attnprof_ring_report_XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr);
  const std::string dir = templ;
  const RingSummary s = two_rank_summary();
  const auto paths = write_ring_report(s, dir);
  ASSERT_EQ(paths.size(), 5u);
  EXPECT_EQ(paths.front(), dir + "/ring-custom-flash/1_16_65536_128_bf16_causal.ring.txt");
  const json summary = json::parse(io::read_file(paths.back()));
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_NEAR(summary["parallel_efficiency"].get<double>(), *s.efficiency(), 1e-12);
  EXPECT_EQ(summary["ranks"].size(), 2u);
  EXPECT_EQ(rank_figures_from_json(summary["ranks"][1]).overlap->exposed_comm_us, 110);
  const json table = json::parse(io::read_file(dir + "/ring-custom-flash/1_16_65536_128_bf16_causal.ring.json"));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_NE(io::read_file(paths.front()).find(ring_headline(s)), std::string::npos);
  for (const auto& p : paths) io::remove_quietly(p);
  ::rmdir((dir + "/ring-custom-flash").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace

// --ring-baseline takes a summary of this run's problem only: the sliding
// window is part of it (a window that hides no key is none).
TEST(RingBaseline, ASummaryOfAnotherWindowIsAnotherProblem) {
  RunRecord r;
  r.variant = "sdpa-flash";
  r.status = Status::ok;
  r.problem.device = "cpu";
  r.problem.batch = 1, r.problem.heads_q = r.problem.heads_kv = 2;
  r.problem.seq_q = r.problem.seq_kv = 128, r.problem.head_dim = 16;
  r.problem.window = 16;
  r.timing = EventTiming{1, 1, 1, 10.0, 10.0, 10.0, "steady_clock"};
  char dir[] = "/tmp/attnprof_ring_baseline_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/w16.summary.json";
  io::write_file_atomic(path, report::summary_json(r).dump());
  Problem p = r.problem;
  EXPECT_NO_THROW(load_ring_baseline(path, p));
  for (int64_t other : {int64_t{0}, int64_t{32}}) {
    p.window = other;
    try {
      load_ring_baseline(path, p);
      ADD_FAILURE() << "window " << other << " took the window-16 summary";
    } catch (const io::FileError& e) {
      EXPECT_NE(std::string(e.what()).find("a summary of another problem"), std::string::npos) << e.what();
    }
  }
  p.window = 128;  // hides nothing, as does a summary without a window
  r.problem.window = 0;
  io::write_file_atomic(path, report::summary_json(r).dump());
  EXPECT_NO_THROW(load_ring_baseline(path, p));
  // A paged cache's run, or a backward's, is another problem too.
  for (const auto& [page, pass] : {std::pair{int64_t{16}, Pass::fwd}, std::pair{int64_t{0}, Pass::bwd}}) {
    r.problem.page_size = page, r.problem.pass = pass;
    io::write_file_atomic(path, report::summary_json(r).dump());
    EXPECT_THROW(load_ring_baseline(path, p), io::FileError) << "page " << page << ", " << pass_name(pass);
  }
}
