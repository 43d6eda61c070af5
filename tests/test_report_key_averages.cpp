// key_averages and the table on hand-built event trees: the semantics of
// Python's profiler_util (self vs total, kernel attribution via correlation ids,
// sorting, truncation), without LibTorch or a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "attnprof/report/scope_stats.h"
#include "attnprof/report/key_averages_table.h"

using namespace attnprof;

namespace {

constexpr uint64_t kThread = 7;

TraceEvent cpu_op(const std::string& name, int64_t start_us, int64_t end_us, uint64_t id,
                  bool user_scope = false) {
  TraceEvent e;
  e.name = name;
  e.start_ns = start_us * 1000;
  e.end_ns = end_us * 1000;
  e.thread = kThread;
  e.correlation_id = id;
  e.is_user_annotation = user_scope;
  e.activity = user_scope ? "user_annotation" : "cpu_op";
  return e;
}

// A runtime call recorded on another thread id (CUPTI's), linked to `op`.
TraceEvent launch(int64_t start_us, int64_t end_us, uint64_t cupti_id, uint64_t op) {
  TraceEvent e = cpu_op("cudaLaunchKernel", start_us, end_us, cupti_id);
  e.thread = 99;
  e.linked_correlation_id = op;
  e.activity = "cuda_runtime";
  return e;
}

TraceEvent kernel(const std::string& name, int64_t start_us, int64_t end_us, uint64_t cupti_id, uint64_t op,
                  const std::string& activity = "kernel") {
  TraceEvent e;
  e.name = name;
  e.device = EventDevice::Cuda;
  e.start_ns = start_us * 1000;
  e.end_ns = end_us * 1000;
  e.thread = 1000;
  e.correlation_id = cupti_id;
  e.linked_correlation_id = op;
  e.activity = activity;
  e.is_user_annotation = activity == "gpu_user_annotation";
  return e;
}

// One step: ProfilerStep#N > attn_fwd > {matmul > mm > launch, softmax > launch, fill > memcpy}.
std::vector<TraceEvent> one_step(int n, int64_t t0, uint64_t id0) {
  return {
      cpu_op("ProfilerStep#" + std::to_string(n), t0 + 0, t0 + 1000, id0 + 1, true),
      cpu_op("attn_fwd", t0 + 10, t0 + 900, id0 + 2, true),
      cpu_op("aten::matmul", t0 + 20, t0 + 300, id0 + 3),
      cpu_op("aten::mm", t0 + 30, t0 + 290, id0 + 4),
      launch(t0 + 40, t0 + 60, id0 + 50, id0 + 4),
      kernel("gemm_kernel", t0 + 100, t0 + 400, id0 + 50, id0 + 4),
      cpu_op("aten::softmax", t0 + 310, t0 + 500, id0 + 5),
      launch(t0 + 320, t0 + 330, id0 + 51, id0 + 5),
      kernel("softmax_kernel", t0 + 400, t0 + 450, id0 + 51, id0 + 5),
      cpu_op("aten::clone", t0 + 510, t0 + 600, id0 + 6),
      kernel("Memcpy DtoD (Device -> Device)", t0 + 450, t0 + 470, id0 + 52, id0 + 6, "gpu_memcpy"),
      kernel("attn_fwd", t0 + 100, t0 + 470, id0 + 53, 0, "gpu_user_annotation"),
  };
}

std::vector<TraceEvent> three_steps() {
  std::vector<TraceEvent> all;
  for (int s = 0; s < 3; ++s) {
    auto step = one_step(2 + s, s * 2000, s * 100);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

const OpStats& row(const std::vector<OpStats>& rows, const std::string& name,
                   EventDevice dev = EventDevice::Cpu) {
  auto it = std::find_if(rows.begin(), rows.end(),
                         [&](const OpStats& s) { return s.name == name && s.device == dev; });
  if (it == rows.end()) throw std::runtime_error("no row " + name);
  return *it;
}

}  // namespace

TEST(KeyAverages, SelfCpuIsOwnTimeMinusChildren) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  const OpStats& matmul = row(rows, "aten::matmul");
  EXPECT_EQ(matmul.count, 3);
  EXPECT_EQ(matmul.cpu_time_total_ns, 3 * 280'000);
  EXPECT_EQ(matmul.self_cpu_time_total_ns, 3 * (280'000 - 260'000));
  // The launch call is moved to the op's thread and nests under aten::mm.
  const OpStats& mm = row(rows, "aten::mm");
  EXPECT_EQ(mm.self_cpu_time_total_ns, 3 * (260'000 - 20'000));
  EXPECT_EQ(row(rows, "cudaLaunchKernel").count, 6);
}

TEST(KeyAverages, KernelsGoToInnermostLaunchingOpAndAllAncestors) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  EXPECT_EQ(row(rows, "aten::mm").self_device_time_total_ns, 3 * 300'000);
  EXPECT_EQ(row(rows, "aten::matmul").self_device_time_total_ns, 0);
  EXPECT_EQ(row(rows, "aten::matmul").device_time_total_ns, 3 * 300'000);
  EXPECT_EQ(row(rows, "aten::clone").self_device_time_total_ns, 3 * 20'000);
  // attn_fwd (CPU scope) holds everything launched inside it.
  const OpStats& fwd = row(rows, "attn_fwd");
  EXPECT_EQ(fwd.device_time_total_ns, 3 * (300'000 + 50'000 + 20'000));
  EXPECT_EQ(fwd.self_device_time_total_ns, 0);
  EXPECT_DOUBLE_EQ(fwd.device_time_avg_ns(), 370'000.0);
  // The GPU-side annotation is its own row, kept out of the footer total.
  const OpStats& gpu_fwd = row(rows, "attn_fwd", EventDevice::Cuda);
  EXPECT_TRUE(gpu_fwd.is_user_annotation);
  EXPECT_EQ(gpu_fwd.self_device_time_total_ns, 3 * 370'000);
  EXPECT_EQ(table_totals(rows).self_device_time_total_ns, 3 * 370'000);
  // Kernel rows carry device time only.
  EXPECT_EQ(row(rows, "gemm_kernel", EventDevice::Cuda).cpu_time_total_ns, 0);
}

TEST(KeyAverages, ProfilerStepsFoldIntoOneRow) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  EXPECT_EQ(row(rows, "ProfilerStep*").count, 3);
  for (const auto& r : rows) EXPECT_EQ(r.name.find("ProfilerStep#"), std::string::npos) << r.name;
}

TEST(KeyAverages, CpuOnlyProfileHasNoDeviceTime) {
  std::vector<TraceEvent> cpu_only;
  for (const auto& e : three_steps())
    if (e.device == EventDevice::Cpu && e.activity != "cuda_runtime") cpu_only.push_back(e);
  const auto rows = key_averages(build_function_events(cpu_only, false));
  for (const auto& r : rows) EXPECT_EQ(r.device_time_total_ns, 0) << r.name;
  const std::string table = format_key_averages_table(rows, {});
  EXPECT_EQ(table.find("CUDA"), std::string::npos);
  EXPECT_NE(table.find("Self CPU time total: 3.000ms"), std::string::npos) << table;
}

TEST(KeyAverages, PartialOverlapIsNotNesting) {
  // Python records no parent for an interval that only partly overlaps another.
  std::vector<TraceEvent> ev = {cpu_op("a", 0, 100, 1), cpu_op("b", 50, 150, 2)};
  const auto fes = build_function_events(ev, false);
  ASSERT_EQ(fes.size(), 2u);
  EXPECT_EQ(fes[1].parent, -1);
  EXPECT_EQ(fes[0].self_cpu_time_total_ns, 100'000);
}

TEST(KeyAverages, FilteredUtilityOpsAreDropped) {
  std::vector<TraceEvent> ev = {cpu_op("aten::is_leaf", 0, 10, 1), cpu_op("[memory]", 0, 0, 2),
                                cpu_op("aten::add", 20, 30, 3)};
  const auto rows = key_averages(build_function_events(ev, false));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].name, "aten::add");
}

TEST(KeyAveragesTable, SortsDescendingAndStable) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  const auto by_cuda = sort_rows(rows, SortKey::CudaTimeTotal);
  for (size_t i = 1; i < by_cuda.size(); ++i)
    EXPECT_GE(by_cuda[i - 1].device_time_total_ns, by_cuda[i].device_time_total_ns);
  const auto by_count = sort_rows(rows, SortKey::Count);
  EXPECT_EQ(by_count[0].name, "cudaLaunchKernel");
  // Ties keep first-seen order, as Python's stable sorted(reverse=True) does.
  EXPECT_EQ(by_count[1].name, "ProfilerStep*");
  const auto by_self_cpu = sort_rows(rows, SortKey::SelfCpuTimeTotal);
  for (size_t i = 1; i < by_self_cpu.size(); ++i)
    EXPECT_GE(by_self_cpu[i - 1].self_cpu_time_total_ns, by_self_cpu[i].self_cpu_time_total_ns);
}

TEST(KeyAveragesTable, LayoutMatchesPython) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  TableOptions opt;
  opt.sort_by = SortKey::CudaTimeTotal;
  opt.row_limit = 3;
  const std::string table = format_key_averages_table(rows, opt);
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // sep, header, sep, 3 rows, sep, two footer lines
  ASSERT_EQ(lines.size(), 9u) << table;
  // Longest name is "Memcpy DtoD (Device -> Device)" (30 chars): column width 34.
  std::string sep = std::string(34, '-') + "  ";
  for (int i = 0; i < 10; ++i) sep += std::string(12, '-') + "  ";
  EXPECT_EQ(lines[0], sep);
  EXPECT_EQ(lines[1].substr(0, 34 + 2 + 12), std::string(30, ' ') + "Name" + "  " + "  Self CPU %");
  EXPECT_NE(lines[1].find("   Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  "), std::string::npos) << lines[1];
  // ProfilerStep*, attn_fwd and the GPU annotation all total 1.110ms; ties keep
  // first-seen order, so the step comes first.
  EXPECT_EQ(lines[3].substr(0, 34), std::string(34 - 13, ' ') + "ProfilerStep*");
  EXPECT_EQ(lines[8], "Self CUDA time total: 1.110ms");
  EXPECT_EQ(lines[7].rfind("Self CPU time total: ", 0), 0u);
}

TEST(KeyAveragesTable, ExactRowFormatting) {
  std::vector<TraceEvent> ev = {cpu_op("aten::add", 0, 1500, 1), cpu_op("aten::mul", 2000, 2500, 2)};
  const auto rows = key_averages(build_function_events(ev, false));
  TableOptions opt;
  opt.sort_by = SortKey::CpuTimeTotal;
  const std::string table = format_key_averages_table(rows, opt);
  // name width = len("aten::add") + 4 = 13; times switch to ms at 1000 us.
  EXPECT_NE(table.find("    aten::add        75.00%       1.500ms        75.00%       1.500ms       1.500ms  "
                       "           1  \n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("    aten::mul        25.00%     500.000us        25.00%     500.000us     500.000us"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Self CPU time total: 2.000ms\n"), std::string::npos);
}

TEST(KeyAveragesTable, LongNamesAreTruncatedToTheColumn) {
  const std::string long_name(80, 'k');
  std::vector<TraceEvent> ev = {cpu_op(long_name, 0, 10, 1)};
  const std::string table = format_key_averages_table(key_averages(build_function_events(ev, false)), {});
  EXPECT_NE(table.find(std::string(52, 'k') + "...  "), std::string::npos);
  EXPECT_EQ(table.find(std::string(53, 'k')), std::string::npos);
}

TEST(KeyAveragesTable, RowLimitAndEmpty) {
  const auto rows = key_averages(build_function_events(three_steps(), true));
  TableOptions opt;
  opt.row_limit = 2;
  const std::string t = format_key_averages_table(rows, opt);
  EXPECT_EQ(std::count(t.begin(), t.end(), '\n'), 3 + 2 + 1 + 2);
  EXPECT_EQ(format_key_averages_table({}, opt), "");
}

TEST(KeyAveragesTable, TimeFormatting) {
  EXPECT_EQ(format_time_us(0.0), "0.000us");
  EXPECT_EQ(format_time_us(999.9994), "999.999us");
  EXPECT_EQ(format_time_us(1000.0), "1.000ms");
  EXPECT_EQ(format_time_us(2.5e6), "2.500s");
}

TEST(SortKeys, ParseAcceptsDeviceAlias) {
  EXPECT_EQ(parse_sort_key("cuda_time_total"), SortKey::CudaTimeTotal);
  EXPECT_EQ(parse_sort_key("device_time_total"), SortKey::CudaTimeTotal);
  EXPECT_EQ(parse_sort_key("self_device_time_total"), SortKey::SelfCudaTimeTotal);
  EXPECT_EQ(parse_sort_key("count"), SortKey::Count);
  EXPECT_FALSE(parse_sort_key("cuda_time_totl").has_value());
}

TEST(ScopeStats, CountsDeviceWorkPerCallInOrder) {
  const auto fes = build_function_events(three_steps(), true);
  const ScopeStats st = scope_stats(fes, "attn_fwd");
  EXPECT_EQ(st.calls, 3);
  EXPECT_DOUBLE_EQ(st.kernels_per_call, 3.0);  // gemm, softmax, memcpy; not the annotation
  ASSERT_EQ(st.kernels.size(), 3u);
  EXPECT_EQ(st.kernels[0].name, "gemm_kernel");
  EXPECT_EQ(st.kernels[1].name, "softmax_kernel");
  EXPECT_EQ(st.kernels[2].name, "Memcpy DtoD (Device -> Device)");
  EXPECT_DOUBLE_EQ(st.device_time_avg_us, 370.0);
  EXPECT_DOUBLE_EQ(st.cpu_time_avg_us, 890.0);
}

// A kernel whose module CUDA loads lazily inside the op: the trace's "Lazy
// Function Loading" event carries the op's id, so Python's table gives the
// kernel to both rows (cuDNN's ragged call on the H200: 6.4 ms kernel, 12.8 ms
// CUDA total). The scope counts it once.
TEST(ScopeStats, AKernelTwoOpsOwnCountsOnce) {
  std::vector<TraceEvent> ev = {
      cpu_op("attn_fwd", 0, 100, 1, true),
      cpu_op("aten::_cudnn_attention_forward", 10, 90, 2),
      cpu_op("Lazy Function Loading", 12, 18, 2),
      launch(20, 30, 500, 2),
      kernel("cudnn_fprop", 40, 80, 500, 2),
  };
  const auto fes = build_function_events(ev, true);
  const auto rows = key_averages(fes);
  EXPECT_EQ(row(rows, "Lazy Function Loading").self_device_time_total_ns, 40'000) << "Python's attribution, kept";
  const ScopeStats st = scope_stats(fes, "attn_fwd");
  EXPECT_DOUBLE_EQ(st.kernels_per_call, 1.0);
  ASSERT_EQ(st.kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(st.kernels[0].count_per_call, 1.0);
  EXPECT_DOUBLE_EQ(st.device_time_avg_us, 40.0);
}

TEST(ScopeStats, Tflops) {
  EXPECT_NEAR(*achieved_tflops(2e12, 1e6), 2.0, 1e-12);
  EXPECT_FALSE(achieved_tflops(1.0, 0.0).has_value());
}

TEST(KeyAverages, SameNameSingleChildFoldsIntoParent) {
  // mul.Scalar redispatching to mul.Tensor: two nested aten::mul, one row in Python.
  std::vector<TraceEvent> ev = {
      cpu_op("aten::mul", 0, 100, 1),
      cpu_op("aten::mul", 10, 90, 2),
      cpu_op("aten::to", 20, 30, 3),
      launch(40, 50, 500, 2),
      kernel("mul_kernel", 60, 80, 500, 2),
  };
  const auto fes = build_function_events(ev, true);
  const auto rows = key_averages(fes);
  const OpStats& mul = row(rows, "aten::mul");
  EXPECT_EQ(mul.count, 1);
  EXPECT_EQ(mul.cpu_time_total_ns, 100'000);
  EXPECT_EQ(mul.self_device_time_total_ns, 20'000) << "the parent takes over the child's kernels";
  EXPECT_EQ(mul.self_cpu_time_total_ns, 100'000 - 10'000 - 10'000);  // children: aten::to and the launch
  EXPECT_EQ(row(rows, "aten::to").count, 1);
}

TEST(KeyAverages, SameNameWithSiblingsIsKept) {
  std::vector<TraceEvent> ev = {cpu_op("aten::copy_", 0, 100, 1), cpu_op("aten::copy_", 10, 40, 2),
                                cpu_op("aten::empty", 50, 60, 3)};
  EXPECT_EQ(row(key_averages(build_function_events(ev, false)), "aten::copy_").count, 2);
}

TEST(ScopeStats, RuntimeCallIdsNeverCaptureAnotherForwardsWork) {
  // CUPTI numbers runtime calls independently of op ids: here forward 1's launch
  // has CUPTI id 7 and forward 2's op also has id 7. Forward 2's kernel must not
  // be counted in forward 1.
  std::vector<TraceEvent> ev = {
      cpu_op("attn_fwd", 0, 100, 1, true),
      cpu_op("aten::mm", 10, 90, 2),
      launch(20, 30, 7, 2),
      kernel("k_first", 40, 60, 7, 2),
      cpu_op("attn_fwd", 200, 300, 6, true),
      cpu_op("aten::mm", 210, 290, 7),
      launch(220, 230, 8, 7),
      kernel("k_second", 240, 260, 8, 7),
  };
  const ScopeStats st = scope_stats(build_function_events(ev, true), "attn_fwd");
  EXPECT_EQ(st.calls, 2);
  EXPECT_DOUBLE_EQ(st.kernels_per_call, 1.0);
  ASSERT_EQ(st.first_call.size(), 1u);
  EXPECT_EQ(st.first_call[0].name, "k_first");
  // Each kernel name appears in one call only: mean over both calls, min 0.
  ASSERT_EQ(st.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(st.kernels[0].count_per_call, 0.5);
  EXPECT_DOUBLE_EQ(st.kernels[0].time_avg_us, 10.0);
  EXPECT_DOUBLE_EQ(st.kernels[0].time_min_us, 0.0);
  EXPECT_DOUBLE_EQ(st.kernels[0].time_max_us, 20.0);
}

// On CUDA, autograd runs a backward's nodes on its device thread while the
// calling thread waits inside attn_bwd: the scope's kernels are launched by ops
// of another thread that lie inside its span. Ops of that thread outside the
// span (before or after) are not the scope's.
TEST(ScopeStats, AdoptsOtherThreadsOpsInsideTheScopeSpan) {
  auto on_thread = [](TraceEvent e, uint64_t thread) {
    e.thread = thread;
    return e;
  };
  std::vector<TraceEvent> ev = {
      cpu_op("attn_bwd", 100, 500, 1, true),
      on_thread(cpu_op("autograd::engine::evaluate_function: MmBackward0", 150, 300, 2), 77),
      on_thread(cpu_op("aten::mm", 160, 290, 3), 77),
      launch(170, 180, 11, 3),
      kernel("k_grad", 200, 260, 11, 3),
      on_thread(cpu_op("aten::mul", 600, 700, 4), 77),  // after the scope
      launch(610, 620, 12, 4),
      kernel("k_later", 630, 640, 12, 4),
  };
  const ScopeStats st = scope_stats(build_function_events(ev, true), "attn_bwd");
  EXPECT_EQ(st.calls, 1);
  EXPECT_DOUBLE_EQ(st.kernels_per_call, 1.0);
  EXPECT_DOUBLE_EQ(st.device_time_avg_us, 60.0);
  ASSERT_EQ(st.kernels.size(), 1u);
  EXPECT_EQ(st.kernels[0].name, "k_grad");
  ASSERT_EQ(st.first_call.size(), 1u);
  // Python's semantics stay in the key-averages rows: the scope's own row has
  // no device time, as torch.profiler shows a record_function around backward().
  EXPECT_EQ(row(key_averages(build_function_events(ev, true)), "attn_bwd").device_time_total_ns, 0);
}

// Kernel figures are per call over all calls (mean, min, max), one convention
// with the scope's own time; the scopes of one step are told apart by name.
TEST(ScopeStats, KernelTimesAreMeanMinMaxOverCalls) {
  std::vector<TraceEvent> ev;
  uint64_t id = 1;
  for (int call = 0; call < 3; ++call) {
    const int64_t t0 = 1000 * call;
    const uint64_t op = id++, fwd = id++;
    ev.push_back(cpu_op("attn_fwd", t0, t0 + 400, fwd, true));
    ev.push_back(cpu_op("aten::mm", t0 + 10, t0 + 390, op));
    for (int k = 0; k <= call; ++k) {  // call c launches c + 1 kernels of (c + 1) ms each
      const uint64_t cid = 10000 + id++;
      ev.push_back(launch(t0 + 20 + 50 * k, t0 + 30 + 50 * k, cid, op));
      ev.push_back(kernel("k", t0 + 40 + 50 * k, t0 + 40 + 50 * k + 1000 * (call + 1), cid, op));
    }
    const uint64_t bwd = id++, bop = id++, cid = 20000 + id++;
    ev.push_back(cpu_op("attn_bwd", t0 + 500, t0 + 900, bwd, true));
    ev.push_back(cpu_op("aten::bmm", t0 + 510, t0 + 890, bop));
    ev.push_back(launch(t0 + 520, t0 + 530, cid, bop));
    ev.push_back(kernel("k_bwd", t0 + 540, t0 + 560, cid, bop));
  }
  const auto fes = build_function_events(ev, true);
  const ScopeStats f = scope_stats(fes, "attn_fwd"), b = scope_stats(fes, "attn_bwd");
  EXPECT_EQ(f.calls, 3);
  EXPECT_DOUBLE_EQ(f.kernels_per_call, 2.0);  // 1, 2, 3 launches
  ASSERT_EQ(f.kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(f.kernels[0].count_per_call, 2.0);
  // per call: 1 x 1 ms, 2 x 2 ms, 3 x 3 ms
  EXPECT_DOUBLE_EQ(f.kernels[0].time_avg_us, (1000.0 + 4000.0 + 9000.0) / 3);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_min_us, 1000.0);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_max_us, 9000.0);
  EXPECT_DOUBLE_EQ(f.device_time_min_us, 1000.0);
  EXPECT_DOUBLE_EQ(f.device_time_max_us, 9000.0);
  EXPECT_EQ(b.calls, 3);
  ASSERT_EQ(b.kernels.size(), 1u);
  EXPECT_EQ(b.kernels[0].name, "k_bwd");
  EXPECT_EQ(scope_stats(fes, "no_such_scope").calls, 0);
}

// --profile-memory, as Python's _parse_kineto_results and _build_table: a
// record counts towards every CPU event whose [start, end] holds its time
// (nested ones too, so self = own minus the children's); one inside no event
// is a "[memory]" row of its own; device memory is a column of its own.
namespace {
TraceEvent memory(int64_t at_us, int64_t bytes, EventDevice dev = EventDevice::Cpu) {
  TraceEvent e;
  e.name = "[memory]";
  e.device = dev;
  e.start_ns = e.end_ns = at_us * 1000;
  e.thread = kThread;
  e.nbytes = bytes;
  e.activity = "cpu_instant_event";
  return e;
}
}  // namespace

TEST(KeyAveragesMemory, RecordsCountTowardsEveryEnclosingOpAndTheRestAreMemoryRows) {
  std::vector<TraceEvent> ev = {
      cpu_op("ProfilerStep#2", 0, 1000, 1, true), cpu_op("aten::matmul", 100, 500, 2), cpu_op("aten::mm", 200, 400, 3),
      memory(300, 4096),                             // inside mm (and matmul, and the step)
      memory(450, 1024),                             // inside matmul only
      memory(500, -1024),                            // at matmul's end: counted (the interval is closed)
      memory(600, 2048, EventDevice::Cuda),          // device memory, in the step
      memory(1500, 512), memory(1600, -512),         // inside no event: two [memory] events
  };
  EXPECT_THROW(row(key_averages(build_function_events(ev, true)), "[memory]"), std::runtime_error)
      << "without --profile-memory the records are dropped";
  const auto rows = key_averages(build_function_events(ev, true, /*profile_memory=*/true));
  const OpStats& mm = row(rows, "aten::mm");
  EXPECT_EQ(mm.cpu_memory_usage, 4096);
  EXPECT_EQ(mm.self_cpu_memory_usage, 4096);
  const OpStats& matmul = row(rows, "aten::matmul");
  EXPECT_EQ(matmul.cpu_memory_usage, 4096 + 1024 - 1024);
  EXPECT_EQ(matmul.self_cpu_memory_usage, 1024 - 1024);
  const OpStats& step = row(rows, "ProfilerStep*");
  EXPECT_EQ(step.cpu_memory_usage, 4096);
  EXPECT_EQ(step.device_memory_usage, 2048);
  EXPECT_EQ(step.self_cpu_memory_usage, 0);
  EXPECT_EQ(step.self_device_memory_usage, 2048);
  const OpStats& loose = row(rows, "[memory]");
  EXPECT_EQ(loose.count, 2);
  EXPECT_EQ(loose.cpu_memory_usage, 0);
  EXPECT_EQ(loose.self_cpu_memory_usage, 0);
  EXPECT_EQ(loose.cpu_time_total_ns, 0);
}

TEST(KeyAveragesMemory, TheTableGainsPythonsMemoryColumns) {
  std::vector<TraceEvent> ev = {cpu_op("aten::empty", 0, 1000, 1), memory(500, 3 << 20), memory(2000, 100)};
  TableOptions opt;
  opt.sort_by = SortKey::CpuTimeTotal;
  const auto rows = key_averages(build_function_events(ev, false, true));
  EXPECT_EQ(format_key_averages_table(rows, opt).find("CPU Mem"), std::string::npos) << "only with --profile-memory";
  opt.profile_memory = true;
  const std::string table = format_key_averages_table(rows, opt);
  EXPECT_NE(table.find("     CPU Mem  Self CPU Mem    # of Calls  \n"), std::string::npos) << table;
  EXPECT_NE(table.find("     3.00 MB       3.00 MB             1  \n"), std::string::npos) << table;
  EXPECT_NE(table.find("[memory]"), std::string::npos) << table;
  EXPECT_NE(table.find("       100 B         100 B             1  \n"), std::string::npos) << table;
  EXPECT_EQ(table.find("CUDA Mem"), std::string::npos) << "no device memory, no device columns";
  ev.push_back(memory(600, 1 << 10, EventDevice::Cuda));
  const std::string with_device =
      format_key_averages_table(key_averages(build_function_events(ev, false, true)), opt);
  EXPECT_NE(with_device.find("     CPU Mem  Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls"), std::string::npos)
      << with_device;
  EXPECT_NE(with_device.find("     1.00 KB       1.00 KB"), std::string::npos) << with_device;
}

TEST(KeyAveragesMemory, FormatsAsPythonsFormatMemory) {
  EXPECT_EQ(format_memory(0), "0 B");
  EXPECT_EQ(format_memory(1023), "1023 B");
  EXPECT_EQ(format_memory(-1023), "-1023 B");
  EXPECT_EQ(format_memory(1024), "1.00 KB");
  EXPECT_EQ(format_memory(-221163), "-215.98 KB");
  EXPECT_EQ(format_memory(int64_t(3) << 20), "3.00 MB");
  EXPECT_EQ(format_memory(int64_t(5) << 30), "5.00 GB");
  EXPECT_EQ(parse_sort_key("self_cpu_memory_usage"), SortKey::SelfCpuMemoryUsage);
  EXPECT_EQ(parse_sort_key("device_memory_usage"), SortKey::CudaMemoryUsage);
}
