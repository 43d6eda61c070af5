#include "attnprof/report/timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "attnprof/report/fingerprint.h"
#include "attnprof/report/kernel_names.h"
#include "attnprof/report/svg_text.h"

namespace attnprof::report {
namespace {

using svg::px;
using svg::xml_escape;

// Layout, px. The label column fits "sdpa-efficient (A)" in bold and
// "20 kernels/fwd incl. 1 memcpy, 1 memset" at 10.5 px.
constexpr double kMargin = 12.0;
constexpr double kLabelWidth = 250.0;
constexpr double kRightMargin = 24.0;
constexpr double kRowsTop = 66.0;
constexpr double kLaneHeight = 24.0;
constexpr double kBoxHeight = 20.0;
constexpr double kRowPadding = 7.0;
constexpr double kMinRowHeight = 40.0;  // two label lines
constexpr size_t kMaxLanes = 8;         // overlapping work (several streams) stacks in lanes
constexpr double kBoxFont = 10.5;

// One colour per kernel family, so the same library reads the same in every
// row; memcpy and memset take colours no family has, and a dashed outline.
std::string_view family_colour(KernelFamily f) {
  switch (f) {
    case KernelFamily::cublas_nvjet: return "#0072B2";
    case KernelFamily::cublas_xmma: return "#56B4E9";
    case KernelFamily::cublas_legacy: return "#1D4F7A";
    case KernelFamily::cutlass: return "#009E73";
    case KernelFamily::cutlass_fmha: return "#00795A";
    case KernelFamily::flash_attention_2: return "#CC79A7";
    case KernelFamily::cudnn_generated: return "#882255";
    case KernelFamily::aten_elementwise: return "#E69F00";
    case KernelFamily::aten_reduce: return "#B8860B";
    case KernelFamily::aten_softmax: return "#44AA99";
    case KernelFamily::aten_copy: return "#AA4499";
    case KernelFamily::aten_triu_tril: return "#999933";
    case KernelFamily::attnprof: return "#117733";
    case KernelFamily::memcpy: return "#D55E00";
    case KernelFamily::memset: return "#9E9E9E";
    case KernelFamily::unknown: break;
  }
  return "#6A5ACD";
}

// CPU ops have no family: a colour per op name, from a fixed hash (FNV-1a), so
// aten::matmul is the same colour in every row and every run.
constexpr std::array<std::string_view, 8> kOpPalette{"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                                     "#56B4E9", "#882255", "#44AA99", "#999933"};

std::string_view op_colour(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return kOpPalette[h % kOpPalette.size()];
}

KernelFamily family_of(const TimelineBox& b) {
  switch (b.kind) {
    case BoxKind::memcpy: return KernelFamily::memcpy;
    case BoxKind::memset: return KernelFamily::memset;
    default: return fingerprint_kernel(b.name).family;
  }
}

std::string_view box_colour(const TimelineBox& b) {
  return b.kind == BoxKind::cpu_op ? op_colour(b.name) : family_colour(family_of(b));
}

// Dark text on light fills, white on dark ones (relative luminance of the sRGB hex).
std::string_view text_colour(std::string_view fill) {
  const auto channel = [&](size_t i) { return std::stoi(std::string(fill.substr(i, 2)), nullptr, 16) / 255.0; };
  const double y = 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
  return y > 0.45 ? "#111" : "#fff";
}

std::string legend_name(KernelFamily f) {
  if (f == KernelFamily::memcpy) return "Memcpy";
  if (f == KernelFamily::memset) return "Memset";
  if (f == KernelFamily::unknown) return "other kernels";
  return std::string(family_name(f));
}

// 5.376 us -> "5.38 µs", 56.478 -> "56.5 µs", 1065.1 -> "1065 µs".
std::string duration_text(int64_t ns) {
  const double us = static_cast<double>(ns) / 1000.0;
  if (us < 10.0) return fmt::format("{:.2f} \u00b5s", us);
  if (us < 100.0) return fmt::format("{:.1f} \u00b5s", us);
  return fmt::format("{:.0f} \u00b5s", us);
}

// "fwd" for attn_fwd, "bwd" for attn_bwd: the per-call unit in row labels.
std::string scope_word(const std::string& scope) {
  if (scope == kForwardScope) return "fwd";
  if (scope == "attn_bwd") return "bwd";
  return scope;
}

std::string plural(size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// "6 kernels/fwd incl. 1 memcpy" / "12 ops under attn_fwd", then the time.
std::string row_summary(const TimelineRow& row) {
  std::string s;
  if (row.cpu_ops) {
    s = fmt::format("{} under {}", plural(row.work_items, "op", "ops"), row.scope);
  } else {
    s = fmt::format("{}/{}", plural(row.work_items, "kernel", "kernels"), scope_word(row.scope));
    size_t copies = 0, sets = 0;
    for (const TimelineBox& b : row.boxes) {
      copies += b.kind == BoxKind::memcpy;
      sets += b.kind == BoxKind::memset;
    }
    if (copies || sets) {
      s += " incl. ";
      if (copies) s += plural(copies, "memcpy", "memcpys");
      if (copies && sets) s += ", ";
      if (sets) s += plural(sets, "memset", "memsets");
    }
  }
  s += " \u00b7 " + duration_text(row.forward_ns);
  if (row.boxes.size() < row.work_items) s += fmt::format(" (first {} shown)", row.boxes.size());
  return s;
}

std::string row_title(const TimelineRow& row) { return row.run.empty() ? row.variant : row.variant + " \u00b7 " + row.run; }

// Cuts `text` (at a character boundary) with an ellipsis until it fits.
std::string fit_text(const std::string& text, double room_px, double font_px) {
  if (svg::text_width_px(text, font_px) <= room_px) return text;
  const size_t chars = static_cast<size_t>(std::max(0.0, room_px / (0.6 * font_px) - 1.0));
  size_t cut = 0, seen = 0;
  while (cut < text.size() && seen < chars) {
    ++cut;
    while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
    ++seen;
  }
  return text.substr(0, cut) + "\u2026";
}

// Greedy lanes: each box goes to the first lane free at its start.
std::vector<size_t> assign_lanes(const TimelineRow& row, size_t& lanes) {
  std::vector<int64_t> lane_end;
  std::vector<size_t> lane_of;
  for (const TimelineBox& b : row.boxes) {
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > b.start_ns) ++lane;
    if (lane == lane_end.size()) {
      if (lane_end.size() < kMaxLanes) lane_end.push_back(0);
      else lane = kMaxLanes - 1;
    }
    lane_end[lane] = std::max(lane_end[lane], b.start_ns + b.dur_ns);
    lane_of.push_back(lane);
  }
  lanes = std::max<size_t>(1, lane_end.size());
  return lane_of;
}

struct Axis {
  double left = 0, right = 0;
  double max_us = 1.0, step_us = 1.0;
  double x(int64_t ns) const { return left + (static_cast<double>(ns) / 1000.0) / max_us * (right - left); }
};

Axis make_axis(const Timeline& tl) {
  int64_t extent = 0;
  for (const TimelineRow& r : tl.rows)
    for (const TimelineBox& b : r.boxes) extent = std::max(extent, b.start_ns + b.dur_ns);
  Axis a;
  a.left = kMargin + kLabelWidth;
  a.right = std::max(a.left + 100.0, tl.width - kRightMargin);
  const double extent_us = std::max(static_cast<double>(extent) / 1000.0, 0.001);
  a.step_us = svg::nice_step(extent_us / 6.0);
  a.max_us = std::ceil(extent_us / a.step_us - 1e-9) * a.step_us;
  return a;
}

std::string render_box(const TimelineBox& b, const Axis& axis, double top) {
  double x = axis.x(b.start_ns);
  const double w = std::max(axis.x(b.start_ns + b.dur_ns) - x, 1.0);  // 1 px: a 1 ns memset stays visible
  x = std::min(x, axis.right - w);
  const std::string_view fill = box_colour(b);
  const bool copy_or_set = b.kind == BoxKind::memcpy || b.kind == BoxKind::memset;
  const char* kind = b.kind == BoxKind::kernel   ? "kernel"
                     : b.kind == BoxKind::memcpy ? "memcpy"
                     : b.kind == BoxKind::memset ? "memset"
                                                 : "cpu-op";
  std::string out = fmt::format(
      "<rect class=\"box {}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"{}\" "
      "stroke-width=\"{}\"{}><title>{}</title></rect>\n",
      kind, px(x), px(top), px(w), px(kBoxHeight), fill, copy_or_set ? "#000" : "#fff", copy_or_set ? "1" : "0.5",
      copy_or_set ? " stroke-dasharray=\"3 2\"" : "",
      xml_escape(fmt::format("{}\n{} at +{}", b.name, duration_text(b.dur_ns), duration_text(b.start_ns))));
  const std::string label = kernel_symbol(b.name, 80) + " " + duration_text(b.dur_ns);
  if (svg::text_width_px(label, kBoxFont) + 6.0 <= w)
    out += fmt::format("<text class=\"box-label\" x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"{}\">{}</text>\n",
                       px(x + 3.0), px(top + kBoxHeight / 2 + kBoxFont * 0.35), kBoxFont, text_colour(fill),
                       xml_escape(label));
  return out;
}

std::string render_row(const TimelineRow& row, const Axis& axis, double top, double height, bool shaded) {
  std::string out = fmt::format("<g class=\"row\" data-variant=\"{}\" data-run=\"{}\" data-items=\"{}\">\n",
                                xml_escape(row.variant), xml_escape(row.run), row.work_items);
  if (shaded)
    out += fmt::format("<rect class=\"band\" x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#000\" fill-opacity=\"0.04\"/>\n", px(top),
                       px(axis.right + kRightMargin), px(height));
  const std::string title = row_title(row);
  const std::string summary = row_summary(row);
  const double summary_px = svg::fitting_font_px(summary, kLabelWidth - 8.0, 8.0, 10.5);
  out += fmt::format(
      "<text class=\"row-label\" x=\"{}\" y=\"{}\" font-weight=\"bold\"><title>{}</title>{}</text>\n"
      "<text class=\"row-summary\" x=\"{}\" y=\"{}\" font-size=\"{}\" fill=\"#555\">{}</text>\n",
      px(kMargin), px(top + height / 2 - 3.0), xml_escape(title), xml_escape(fit_text(title, kLabelWidth - 8.0, 12.0)),
      px(kMargin), px(top + height / 2 + 11.0), px(summary_px), xml_escape(summary));
  size_t lanes = 1;
  const std::vector<size_t> lane = assign_lanes(row, lanes);
  const double boxes_top = top + (height - lanes * kLaneHeight) / 2 + (kLaneHeight - kBoxHeight) / 2;
  for (size_t i = 0; i < row.boxes.size(); ++i)
    out += render_box(row.boxes[i], axis, boxes_top + static_cast<double>(lane[i]) * kLaneHeight);
  return out + "</g>\n";
}

std::string render_axis(const Axis& axis, double rows_top, double y, const std::string& label) {
  std::string grid = "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  std::string ticks = "<g class=\"ticks\" fill=\"#333\" text-anchor=\"middle\">\n";
  const int n = static_cast<int>(std::lround(axis.max_us / axis.step_us));
  for (int k = 0; k <= n; ++k) {
    const double v = k * axis.step_us;
    const std::string x = px(axis.x(std::llround(v * 1000.0)));
    grid += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", x, px(rows_top), px(y));
    ticks += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\"/>\n", x, px(y), px(y + 5));
    ticks += fmt::format("<text x=\"{}\" y=\"{}\">{:.10g}</text>\n", x, px(y + 18), v);
  }
  return grid + "</g>\n" + ticks + "</g>\n" +
         fmt::format("<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\" stroke-width=\"1.2\"/>\n",
                     px(axis.left), px(y), px(axis.right), px(y)) +
         fmt::format("<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     px((axis.left + axis.right) / 2), px(y + 36), xml_escape(label));
}

// Swatches of the kernel families shown (first appearance order), Memcpy and
// Memset; wraps to the next line at the canvas edge. Returns the height used.
std::string render_legend(const Timeline& tl, double y, double& height) {
  std::vector<KernelFamily> families;
  for (const TimelineRow& r : tl.rows)
    for (const TimelineBox& b : r.boxes)
      if (b.kind != BoxKind::cpu_op)
        if (const KernelFamily f = family_of(b); std::find(families.begin(), families.end(), f) == families.end())
          families.push_back(f);
  // Copies and sets last, where the eye looks for them.
  std::stable_partition(families.begin(), families.end(),
                        [](KernelFamily f) { return f != KernelFamily::memcpy && f != KernelFamily::memset; });
  height = 0;
  if (families.empty()) return {};
  std::string out = "<g class=\"legend\">\n";
  double x = kMargin, line_y = y;
  for (const KernelFamily f : families) {
    const std::string name = legend_name(f);
    const double w = 18.0 + svg::text_width_px(name, 11.0) + 14.0;
    if (x + w > tl.width - kMargin && x > kMargin) {
      x = kMargin;
      line_y += 18.0;
    }
    const bool copy_or_set = f == KernelFamily::memcpy || f == KernelFamily::memset;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"{}/>\n", px(x), px(line_y - 10),
                       family_colour(f), copy_or_set ? " stroke=\"#000\" stroke-dasharray=\"3 2\"" : "");
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n", px(x + 17), px(line_y), xml_escape(name));
    x += w;
  }
  height = line_y - y + 18.0;
  return out + "</g>\n";
}

std::string subtitle(const Timeline& tl) {
  const std::string scope = tl.rows.empty() ? std::string(kForwardScope) : tl.rows.front().scope;
  const std::string call = scope == kForwardScope ? "forward" : scope == "attn_bwd" ? "backward" : "call of " + scope;
  const size_t cpu = static_cast<size_t>(std::count_if(tl.rows.begin(), tl.rows.end(), [](const TimelineRow& r) { return r.cpu_ops; }));
  if (!tl.rows.empty() && cpu == tl.rows.size())
    return fmt::format("CPU-only runs have no kernels: each row shows the ops directly under {} of the median {} "
                       "(by CPU time), from {}'s start",
                       scope, call, scope);
  std::string s = fmt::format("Device work of each run's median {} (by summed device time), from its first kernel", call);
  if (cpu) s += fmt::format("; rows without kernels show the CPU ops under {} instead", scope);
  return s;
}

}  // namespace

TimelineRow timeline_row(const RunTrace& run) {
  if (!run.trace) throw std::invalid_argument("timeline_row: run without a trace");
  const KinetoTrace& t = *run.trace;
  const std::vector<Forward> forwards = find_forwards(t, run.scope);
  if (forwards.empty()) throw TraceError(fmt::format("{}: no {} scope; not an attnprof trace", t.source, run.scope));
  TimelineRow row;
  row.scope = run.scope;
  row.variant = run.variant;
  row.run = run.run;
  row.forwards = forwards.size();
  row.cpu_ops = std::none_of(t.slices.begin(), t.slices.end(), [](const TraceSlice& s) { return is_device_work(s.kind); });
  const auto cost = [&](const Forward& f) { return row.cpu_ops ? t.slices[f.annotation].dur_ns : f.device_ns; };
  std::vector<size_t> order(forwards.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(forwards[a]) < cost(forwards[b]); });
  const Forward& median = forwards[order[(order.size() - 1) / 2]];
  row.forward_ns = cost(median);

  const std::vector<size_t> work = row.cpu_ops ? child_slices(t, median.annotation) : median.device_work;
  row.work_items = work.size();
  const int64_t origin = row.cpu_ops || work.empty() ? t.slices[median.annotation].ts_ns : t.slices[work.front()].ts_ns;
  for (size_t i = 0; i < work.size() && i < kMaxTimelineBoxes; ++i) {
    const TraceSlice& s = t.slices[work[i]];
    TimelineBox b;
    b.name = t.name_of(s);
    b.kind = row.cpu_ops                     ? BoxKind::cpu_op
             : s.kind == SliceKind::memcpy   ? BoxKind::memcpy
             : s.kind == SliceKind::memset   ? BoxKind::memset
                                             : BoxKind::kernel;
    b.start_ns = std::max<int64_t>(0, s.ts_ns - origin);
    b.dur_ns = s.dur_ns;
    row.boxes.push_back(std::move(b));
  }
  return row;
}

std::string render_timeline_svg(const Timeline& tl) {
  const Axis axis = make_axis(tl);
  const double width = std::max<double>(tl.width, axis.right + kRightMargin);
  std::string rows;
  double y = kRowsTop;
  bool shaded = false;
  for (size_t i = 0; i < tl.rows.size(); ++i) {
    const TimelineRow& r = tl.rows[i];
    size_t lanes = 1;
    (void)assign_lanes(r, lanes);
    const double height = std::max(kMinRowHeight, static_cast<double>(lanes) * kLaneHeight + 2 * kRowPadding);
    // Alternate shading by variant, so the A and B rows of one variant read as a pair.
    if (i > 0 && r.variant != tl.rows[i - 1].variant) shaded = !shaded;
    rows += render_row(r, axis, y, height, shaded);
    y += height;
  }
  const bool all_cpu = !tl.rows.empty() &&
                       std::all_of(tl.rows.begin(), tl.rows.end(), [](const TimelineRow& r) { return r.cpu_ops; });
  const std::string scope = tl.rows.empty() ? std::string(kForwardScope) : tl.rows.front().scope;
  const std::string axis_label = all_cpu ? fmt::format("\u00b5s from {}'s start", scope)
                                         : fmt::format("\u00b5s from each {}'s first kernel",
                                                       scope == "attn_bwd" ? "backward" : "forward");
  const double axis_y = y + 6.0;
  double legend_height = 0;
  const std::string legend = render_legend(tl, axis_y + 62.0, legend_height);
  const double height = axis_y + 62.0 + legend_height + 4.0;

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      px(width), px(height), xml_escape(tl.title));
  out += fmt::format("<text class=\"title\" x=\"{}\" y=\"24\" font-size=\"{}\" font-weight=\"bold\">{}</text>\n",
                     px(kMargin), px(svg::fitting_font_px(tl.title, width - 2 * kMargin, 9.0, 15.0)),
                     xml_escape(tl.title));
  const std::string sub = subtitle(tl);
  out += fmt::format("<text class=\"subtitle\" x=\"{}\" y=\"44\" font-size=\"{}\" fill=\"#555\">{}</text>\n", px(kMargin),
                     px(svg::fitting_font_px(sub, width - 2 * kMargin, 8.0, 12.0)), xml_escape(sub));
  out += render_axis(axis, kRowsTop, axis_y, axis_label);
  out += rows;
  out += legend;
  return out + "</svg>\n";
}

}  // namespace attnprof::report
