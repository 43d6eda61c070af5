#include "cli/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <vector>

#include "attnprof/device.h"
#include "attnprof/io/text.h"
#include "attnprof/report/key_averages_table.h"
#include "attnprof/variant.h"

namespace attnprof::cli {

namespace {
constexpr int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min(), kInt64Max = std::numeric_limits<int64_t>::max();

// CLI11 hands a required value over even when it is the next flag ("--seq ,
// --out D" split to nothing and then took "--out"); a negative number is a value.
bool looks_like_flag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
}

// "a,b" -> {"a", "b"}, each item checked not to be a flag. Empty items ("a,,b",
// "a,") are dropped, or refused when `empty_is_error` (a number list: "32,,64"
// is more likely a lost value than a stray comma).
std::vector<std::string> split_list(const std::string& name, const std::vector<std::string>& args,
                                    bool empty_is_error = false) {
  std::vector<std::string> items;
  for (const std::string& arg : args) {
    bool empty = false;
    if (looks_like_flag(arg)) throw CLI::ValidationError(fmt::format("{} needs a value before '{}'", name, arg));
    size_t start = 0;
    while (start <= arg.size()) {
      const size_t comma = std::min(arg.find(',', start), arg.size());
      if (comma > start) items.push_back(arg.substr(start, comma - start));
      else empty = true;
      start = comma + 1;
    }
    if (empty && empty_is_error && !items.empty())
      throw CLI::ValidationError(fmt::format("{} '{}' has an empty item (two commas in a row, or one at an end)", name,
                                             io::visible(arg)));
  }
  if (items.empty())
    throw CLI::ValidationError(fmt::format("{} '{}' names no {}", name, io::visible(join(args, " ")),
                                           name == "--variant" ? "variant (try --list-variants)" : "value"));
  return items;
}
}  // namespace

CLI::Validator decimal_integer(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        const io::DecimalParse d = io::parse_decimal(s);
        if (!d.error.empty()) return d.error;
        if (lo == 0 && d.value < 0) return fmt::format("must be a non-negative integer, got {}", s);
        if (d.value < lo || d.value > hi) return fmt::format("'{}' is out of range ({} to {})", s, lo, hi);
        return std::string();
      },
      "");
}

namespace {
// --warmup-iters, --timing-iters: "auto" (kAutoIters) or a count; a negative
// count is not taken for auto.
void add_iters_option(CLI::App& app, const char* flag, int& target, const std::string& help) {
  app.add_option_function<std::string>(
         flag,
         [flag, &target](const std::string& text) {
           if (text == "auto") {
             target = kAutoIters;
             return;
           }
           // Decimal as typed (io::parse_decimal: no sign +, space, leading zero, hex or exponent).
           const io::DecimalParse d = io::parse_decimal(text);
           if (!d.error.empty())
             throw CLI::ValidationError(fmt::format("{} must be 'auto' or a count: {}", flag, d.error));
           if (d.value < 0) throw CLI::ValidationError(fmt::format("{} must be >= 0, got {}", flag, text));
           if (d.value > kMaxIters)
             throw CLI::ValidationError(fmt::format("{} {} is too large (at most {})", flag, text, kMaxIters));
           target = static_cast<int>(d.value);
         },
         help)
      ->default_str("auto");
}
}  // namespace

void add_integer_list_option(CLI::App& app, const std::string& name, std::vector<int64_t>& out,
                             const std::string& help, bool* given) {
  app.add_option_function<std::vector<std::string>>(
         name,
         [&out, name, given](const std::vector<std::string>& args) {
           if (given) *given = true;
           out.clear();
           for (const std::string& item : split_list(name, args, /*empty_is_error=*/true)) {
             const io::DecimalParse d = io::parse_decimal(item);
             if (!d.error.empty()) throw CLI::ValidationError(name + ": " + d.error);
             // A value given twice (--seq 512,512, or the flag repeated) is one point.
             if (std::find(out.begin(), out.end(), d.value) == out.end()) out.push_back(d.value);
           }
         },
         help)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str([&out] {
        std::string s;
        for (int64_t v : out) s += (s.empty() ? "" : ",") + std::to_string(v);
        return s;
      }());
}

void add_name_list_option(CLI::App& app, const std::string& name, std::vector<std::string>& out,
                          const std::string& help) {
  app.add_option_function<std::vector<std::string>>(
         name,
         [&out, name](const std::vector<std::string>& args) {
           out.clear();
           for (std::string& item : split_list(name, args))  // a name given twice runs once
             if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(std::move(item));
         },
         help)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)  // --variant a --variant b: both
      ->default_str(join(out, ","));
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        return end != s.c_str() && *end == '\0' && v > 0 && v < 1e300
                   ? std::string()
                   : fmt::format("must be a positive number, got {}", s);
      },
      "");
}

// Llama 3 (8B: 32 query heads, 8 KV heads, head_dim 128; 70B: 64 and 8), as
// served: a batch of decodes (1 new query each) against an 8k cache, a 512-
// query chunk of a long prompt, a full 8k prefill; multi-query attention; and
// Mistral-7B's sliding window (4096 keys; 32q/8kv heads, head_dim 128).
const std::vector<ShapePreset>& shape_presets() {
  static const std::vector<ShapePreset> presets = {
      {"llama3-8b-prefill", "Llama-3-8B prefill: 1 x 32q/8kv heads x 8192 x 128", 1, 32, 8, 8192, 8192, 128},
      {"llama3-8b-chunked-prefill", "Llama-3-8B chunked prefill: 512 queries against 8192 keys, 32q/8kv heads",
       1, 32, 8, 512, 8192, 128},
      {"llama3-8b-decode", "Llama-3-8B decode: batch 8, 1 query against an 8192-key cache, 32q/8kv heads", 8, 32, 8,
       1, 8192, 128},
      {"llama3-70b-decode", "Llama-3-70B decode: batch 8, 1 query against an 8192-key cache, 64q/8kv heads", 8, 64,
       8, 1, 8192, 128},
      {"mqa-decode", "multi-query decode: batch 8, 32 query heads sharing 1 KV head, 1 query against 32768 keys", 8,
       32, 1, 1, 32768, 128},
      {"mistral-7b-window", "Mistral-7B prefill through its 4096-key sliding window: 1 x 32q/8kv heads x 16384 x 128",
       1, 32, 8, 16384, 16384, 128, 4096},
      {"llama3-8b-paged-decode", "Llama-3-8B decode from a paged KV cache: batch 8, 1 query against 32768 keys in "
       "16-token pages, 32q/8kv heads",
       8, 32, 8, 1, 32768, 128, 0, 16},
      {"varlen-prefill", "packed prefill of a variable-length batch: 16 sequences of 128-8192 tokens (a seeded "
       "uniform mix), 32q/8kv heads x 128, causal",
       16, 32, 8, 8192, 8192, 128, 0, 0, "mix:16x128-8192"},
  };
  return presets;
}

void add_shape_options(CLI::App& app, CliOptions& o) {
  std::string preset_help = "A named shape (explicit flags override its fields):";
  std::vector<std::string> names;
  for (const ShapePreset& s : shape_presets()) {
    preset_help += fmt::format("\n  {}: {}", s.name, s.what);
    names.push_back(s.name);
  }
  // Defined before the shape flags: CLI11 runs option callbacks in definition
  // order, so a flag given with --shape overrides the preset whatever the order
  // on the command line.
  app.add_option_function<std::string>(
      "--shape",
      [&o, names](const std::string& name) {
        for (const ShapePreset& s : shape_presets()) {
          if (name != s.name) continue;
          o.batch = s.batch, o.heads = s.heads, o.kv_heads = s.kv_heads;
          o.seq = s.seq_kv, o.seq_q = s.seq_q, o.seq_kv = s.seq_kv, o.head_dim = s.head_dim;
          o.window = s.window;
          o.window_from_shape = s.window > 0;
          if (s.page_size > 0) o.kv_layout = "paged", o.page_size = s.page_size, o.page_size_from_shape = true;
          o.seqlens = s.seqlens ? s.seqlens : "";
          return;
        }
        throw CLI::ValidationError(invalid_choice("--shape", name, names));
      },
      preset_help);
  app.add_option("--dtype", o.dtype,
                 "bf16, fp16, fp32 or fp8 (q, k, v in e4m3 with per-head scales, bf16 output; dense forward)")->capture_default_str();
  app.add_flag("--fp8-rotate", o.fp8_rotate, kFp8RotateHelp);
  app.add_option("--batch", o.batch, "Batch size")
      ->capture_default_str()
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.batch_given = true; });
  app.add_option("--heads", o.heads, "Query heads (and key/value heads, unless --kv-heads)")
      ->capture_default_str()
      ->check(decimal_integer(kInt64Min, kInt64Max));
  app.add_option("--kv-heads", o.kv_heads,
                 "Key/value heads, dividing --heads: fewer is grouped-query attention, 1 multi-query (default: --heads)")
      ->check(decimal_integer(kInt64Min, kInt64Max));
  // Callbacks run in definition order (--shape, --seq, --seq-q, --seq-kv): an
  // explicit --seq drops a preset's seq_q/seq_kv before --seq-q/--seq-kv set theirs.
  app.add_option("--seq", o.seq, "Sequence length of queries and keys (unless --seq-q / --seq-kv)")
      ->capture_default_str()
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.seq_given = true, o.seq_q.reset(), o.seq_kv.reset(); });
  app.add_option("--seq-q", o.seq_q, "Queries per head, e.g. 1 for decode (default: --seq)")
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.seq_q_given = true; });
  app.add_option("--seq-kv", o.seq_kv, "Keys/values per head, e.g. the KV-cache length (default: --seq)")
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.seq_kv_given = true; });
  app.add_option("--head-dim", o.head_dim, "Head dimension")->capture_default_str()->check(decimal_integer(kInt64Min, kInt64Max));
  app.add_option("--window", o.window,
                 "Sliding window: each query sees the N most recent keys up to its diagonal (bottom-right aligned "
                 "with the causal mask, FlashAttention's window_size_left = N - 1; needs the causal mask); "
                 "0: none (the default)")
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.window_from_shape = false; });
  app.add_option("--kv-layout", o.kv_layout,
                 "The KV cache's layout: contiguous, or paged (pages of --page-size tokens scattered in a pool "
                 "through a random block table, as inference servers keep it; forward only). Variants without a "
                 "paged kernel gather the pages into contiguous K/V inside the measured scope")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.kv_layout_given = true; });
  app.add_option("--page-size", o.page_size,
                 fmt::format("Tokens per page of a paged KV cache (default {}; implies --kv-layout paged)",
                             kDefaultPageSize))
      ->check(decimal_integer(kInt64Min, kInt64Max))
      ->each([&o](const std::string&) { o.page_size_from_shape = false; });
  app.add_option("--seqlens", o.seqlens,
                 "A variable-length batch: the key lengths of its sequences, \"128,4096,77\", or \"mix:NxLO-HI\" "
                 "(N lengths drawn uniformly from LO..HI, seeded by --seed). Sets --batch and --seq-kv (the "
                 "longest); each sequence has as many queries (prefill, packed by cu_seqlens) or, with --seq-q N, "
                 "its last N (decode against per-sequence cache lengths). Variants without a varlen kernel run "
                 "the padded batch under a mask. Forward only")
      ->each([&o](const std::string&) { o.seqlens_given = true; });
  app.add_option("--varlen-layout", o.varlen_layout,
                 "How variants read a --seqlens batch: packed (the default: those with a cu_seqlens kernel read "
                 "[total, heads, head_dim] rows, the others the padded batch under a mask) or padded (every "
                 "variant the padded batch under a mask: what padding costs on the same backend)")
      ->capture_default_str()
      ->each([&o](const std::string&) { o.varlen_layout_given = true; });
  app.add_option("--pass", o.pass,
                 "What a step runs: fwd (the forward), bwd (the backward of a forward run outside the measured "
                 "scope), fwd+bwd (both)")
      ->capture_default_str();
}

void add_variant_option(CLI::App& app, CliOptions& o) {
  // Split here rather than with CLI11's delimiter, which reads "--variant , --seq 4"
  // as the variant '--seq'. Empty names (",", "a,,b") are dropped; none left is an error.
  add_name_list_option(app, "--variant", o.variants,
                       "Variant(s) to run: a name, a comma list, or 'all' (see --list-variants); repeatable");
}

void add_run_options(CLI::App& app, CliOptions& o) {
  add_iters_option(app, "--timing-iters", o.timing_iters,
                   "Forwards timed without the profiler (CUDA events; steady clock on CPU): auto (as many as fit "
                   "in 0.5 s at the profiled steps' pace, 1 to 100), a count, or 0 to skip");
  app.add_flag("--quiet,-q", o.quiet, "No progress or time estimates on stderr (errors and notes still print)");
  app.add_flag("--kernels", o.kernels, "Also print each kernel's launch API, grid, block, registers, "
               "shared memory and estimated occupancy");
  app.add_flag("--counters", o.counters,
               "After the profiled and timed steps, one more step whose kernels are replayed for their hardware "
               "counters (DRAM bytes, tensor-pipe activity, occupancy, ...), judged against this GPU's measured "
               "ceilings (calibrated once, cached); adds a counters block, verdicts and a roofline");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N (auto: CUDA if present, else CPU)")->capture_default_str();
  // Two flags rather than CLI11's "--causal,!--no-causal", which lets the last
  // one win silently: giving both is refused (build_problem).
  app.add_flag("--causal", o.causal_given, "Causal mask, aligned bottom-right (the default)");
  app.add_flag("--no-causal", o.no_causal_given, "No mask: every query sees every key");
  app.add_option("--seed", o.seed, "Seed for the random inputs")
      ->capture_default_str()
      ->check(decimal_integer(0, kInt64Max));
  app.add_option("--out", o.out, "Output directory")->capture_default_str();
  app.add_flag("--no-gzip", o.no_gzip, "Write the trace as plain .json instead of .json.gz");
  app.add_option("--sort-by", o.sort_by,
                 "Table sort key: cuda_time_total (default on CUDA), cpu_time_total (default on CPU), "
                 "self_cuda_time_total, self_cpu_time_total, cuda_time, cpu_time, count");
  for (const auto& [flag, ref, help] :
       {std::tuple<const char*, int*, const char*>{"--row-limit", &o.row_limit, "Table rows to show (0 = all)"},
        {"--wait", &o.wait, "Profiler schedule: steps run before the profiler is prepared"},
        {"--warmup", &o.warmup, "Profiler schedule: steps traced and thrown away (Kineto warm-up)"},
        {"--active", &o.active, "Profiler schedule: steps recorded"}})
    app.add_option(flag, *ref, help)->capture_default_str()->check(decimal_integer(kIntMin, kIntMax));
  add_iters_option(app, "--warmup-iters", o.warmup_iters,
                   "Untraced forwards before the profiler starts: auto (up to 3, stopping once they pass 2 s) or a "
                   "count");
  app.add_flag("--record-shapes", o.profiler.record_shapes,
               "Record each op's input shapes in the trace (torch.profiler's record_shapes; TensorBoard's "
               "\"group by input shape\"); adds overhead to the recorded steps");
  app.add_flag("--profile-memory", o.profiler.profile_memory,
               "Record allocations and frees (torch.profiler's profile_memory; TensorBoard's memory view)");
  app.add_flag("--with-stack", o.profiler.with_stack,
               "Record call stacks (torch.profiler's with_stack; TensorBoard's call-stack view)");
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

// "unknown --dtype 'bf61' (valid: bf16, fp16, fp32; did you mean 'bf16'?)"
std::string invalid_choice(const std::string& flag, const std::string& value, const std::vector<std::string>& valid) {
  std::string best;
  size_t best_d = 3;  // suggest only close misspellings
  for (const auto& v : valid) {
    const size_t d = edit_distance(value, v);
    if (d < best_d) best_d = d, best = v;
  }
  std::string msg = fmt::format("invalid {} '{}' (valid: {}", flag, value, join(valid));
  if (!best.empty()) msg += fmt::format("; did you mean '{}'?", best);
  return msg + ")";
}

std::vector<std::string> expand_variants(const std::vector<std::string>& requested, bool multi_gpu) {
  const std::vector<std::string> known = variant_names();
  std::vector<std::string> out;
  for (const std::string& v : requested) {
    if (v == "all") {
      for (const auto& k : known)
        if (find_variant(k)->has(VariantTag::multi_gpu) == multi_gpu && std::find(out.begin(), out.end(), k) == out.end())
          out.push_back(k);
      continue;
    }
    if (std::find(known.begin(), known.end(), v) == known.end()) {
      std::vector<std::string> valid = known;
      valid.emplace_back("all");
      throw UsageError(invalid_choice("--variant", v, valid));
    }
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw UsageError("--variant needs at least one name (try --list-variants)");
  return out;
}

void check_positive(const char* flag, int64_t v, int64_t max) {
  if (v <= 0) throw UsageError(fmt::format("{} must be a positive integer, got {}", flag, v));
  if (v > max) throw UsageError(fmt::format("{} {} is too large (at most {})", flag, v, max));
}

int64_t requested_page_size(const CliOptions& o) {
  const bool explicit_page_size = o.page_size && !o.page_size_from_shape;
  if (o.kv_layout == "paged" || (!o.kv_layout_given && explicit_page_size)) return o.page_size.value_or(kDefaultPageSize);
  return 0;
}

namespace {

std::string seqlens_forms() {
  return "a comma list of key lengths, e.g. 128,4096,77, or mix:NxLO-HI, e.g. mix:16x128-8192";
}

// A value as an error line shows it: a list of thousands of lengths is cut, its size said.
std::string shown(const std::string& s) {
  return s.size() <= 64 ? s : s.substr(0, 48) + fmt::format("... ({} characters)", s.size());
}

[[noreturn]] void bad_seqlens(const std::string& spec, const std::string& why) {
  throw UsageError(fmt::format("invalid --seqlens '{}': {} ({})", shown(spec), why, seqlens_forms()));
}

int64_t seqlens_number(const std::string& spec, const std::string& text, const char* what, int64_t max) {
  if (text.empty()) bad_seqlens(spec, fmt::format("{} is missing", what));
  const io::DecimalParse n = io::parse_decimal(text);
  if (!n.error.empty()) bad_seqlens(spec, fmt::format("{} '{}': {}", what, shown(text), n.error));
  if (n.value < 1 || n.value > max) bad_seqlens(spec, fmt::format("{} {} is outside 1..{}", what, n.value, max));
  return n.value;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<int64_t> parse_seqlens(const std::string& spec, uint64_t seed) {
  std::vector<int64_t> lengths;
  if (spec.rfind("mix:", 0) == 0) {
    const std::string body = spec.substr(4);
    const size_t x = body.find('x'), dash = body.find('-', x == std::string::npos ? 0 : x);
    if (x == std::string::npos || dash == std::string::npos) bad_seqlens(spec, "a mix is NxLO-HI");
    const int64_t n = seqlens_number(spec, body.substr(0, x), "the count", kMaxSeqlens);
    const int64_t lo = seqlens_number(spec, body.substr(x + 1, dash - x - 1), "the shortest length", kMaxSeq);
    const int64_t hi = seqlens_number(spec, body.substr(dash + 1), "the longest length", kMaxSeq);
    if (lo > hi) bad_seqlens(spec, fmt::format("the shortest length {} is above the longest {}", lo, hi));
    uint64_t state = seed;
    const uint64_t span = uint64_t(hi - lo) + 1;
    for (int64_t i = 0; i < n; ++i) lengths.push_back(lo + int64_t(splitmix64(state) % span));
    return lengths;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    if (item.empty()) bad_seqlens(spec, "an empty length");
    if (int64_t(lengths.size()) == kMaxSeqlens) bad_seqlens(spec, fmt::format("more than {} lengths", kMaxSeqlens));
    lengths.push_back(seqlens_number(spec, item, "length", kMaxSeq));
    start = comma + 1;
  }
  return lengths;
}

DType dtype_option(const std::string& value) {
  if (const auto d = parse_dtype(value)) return *d;
  std::string lower = value;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("e5m2") != std::string::npos)
    throw UsageError(fmt::format("--dtype {}: attnprof's fp8 attention takes e4m3 inputs (--dtype fp8); e5m2 is "
                                 "not supported",
                                 value));
  throw UsageError(invalid_choice("--dtype", value, dtype_names()));
}

Problem build_problem(const CliOptions& o) {
  Problem p;
  const DType dtype = dtype_option(o.dtype);
  if (o.fp8_rotate && dtype != DType::FP8)
    throw UsageError(fmt::format("--fp8-rotate rotates q and k before their fp8 quantisation: it needs --dtype fp8, "
                                 "not --dtype {}",
                                 o.dtype));
  const auto pass = parse_pass(o.pass);
  if (!pass) throw UsageError(invalid_choice("--pass", o.pass, pass_names()));
  if (o.causal_given && o.no_causal_given)
    throw UsageError("--causal and --no-causal contradict each other; give one (causal is the default)");
  const bool causal = !o.no_causal_given;
  const int64_t kv_heads = o.kv_heads.value_or(o.heads);
  if (o.seq_given && o.seq_q_given && o.seq_kv_given)
    throw UsageError(fmt::format("--seq {} is unused when --seq-q and --seq-kv are both given; give --seq, or "
                                 "--seq-q / --seq-kv",
                                 o.seq));
  int64_t seq_q = o.seq_q.value_or(o.seq), seq_kv = o.seq_kv.value_or(o.seq), batch = o.batch;
  std::vector<int64_t> seqlens;
  if (o.seqlens_given && o.seqlens.empty()) bad_seqlens("", "no lengths");
  if (o.varlen_layout != "packed" && o.varlen_layout != "padded")
    throw UsageError(invalid_choice("--varlen-layout", o.varlen_layout, {"packed", "padded"}));
  if (o.varlen_layout_given && o.seqlens.empty())
    throw UsageError(fmt::format("--varlen-layout {} needs a variable-length batch: add --seqlens (or a varlen "
                                 "--shape preset)",
                                 o.varlen_layout));
  if (!o.seqlens.empty()) {
    seqlens = parse_seqlens(o.seqlens, o.seed);
    const auto [lo, hi] = std::minmax_element(seqlens.begin(), seqlens.end());
    const std::string listed = fmt::format("the {} sequence{} --seqlens lists", seqlens.size(),
                                           seqlens.size() == 1 ? "" : "s");
    if (o.batch_given) check_positive("--batch", o.batch, kMaxBatch);
    if (o.batch_given && o.batch != int64_t(seqlens.size()))
      throw UsageError(fmt::format("--batch {} differs from {}; drop --batch (the lengths set the batch)", o.batch,
                                   listed));
    if (o.seq_given || o.seq_kv_given)
      throw UsageError(fmt::format("--{} {} is unused with --seqlens, whose longest sequence ({}) sets the keys; "
                                   "drop it (--seq-q N takes each sequence's last N tokens as queries)",
                                   o.seq_kv_given ? "seq-kv" : "seq", o.seq_kv_given ? *o.seq_kv : o.seq, *hi));
    // Queries: each sequence's last N with --seq-q N (or a decode preset's), else every token (prefill).
    const bool preset_chunk = o.seq_q && o.seq_kv && *o.seq_q != *o.seq_kv;
    batch = int64_t(seqlens.size());
    seq_kv = *hi;
    seq_q = o.seq_q_given || preset_chunk ? *o.seq_q : *hi;
    if (seq_q != seq_kv && seq_q > *lo)
      throw UsageError(o.seq_q_given
                           ? fmt::format("--seq-q {} is more than the shortest sequence of --seqlens ({} keys): each "
                                         "sequence's last {} tokens are its queries; use --seq-q <= {}",
                                         seq_q, *lo, seq_q, *lo)
                           : fmt::format("the --shape preset's {} queries per sequence are more than the shortest "
                                         "sequence of --seqlens ({} keys); add --seq-q N with N <= {}",
                                         seq_q, *lo, *lo));
    // Named as the user asked for the lengths: --seqlens, or the preset's.
    const std::string asked = o.seqlens_given ? "a variable-length batch (--seqlens)"
                                              : "the --shape preset's variable-length batch";
    if (*pass != Pass::fwd)
      throw UsageError(fmt::format("{} runs the forward only for now: use --pass fwd, not {}", asked, o.pass));
    if (requested_page_size(o) > 0)
      throw UsageError(o.page_size_from_shape && !o.kv_layout_given
                           ? fmt::format("the --shape preset's paged KV cache with {} is not built yet: add "
                                         "--kv-layout contiguous",
                                         asked)
                           : fmt::format("{} with a paged KV cache is not built yet: give one of --seqlens and "
                                         "--kv-layout paged",
                                         asked));
  }
  check_positive("--batch", batch, kMaxBatch);
  check_positive("--heads", o.heads, kMaxHeads);
  check_positive("--kv-heads", kv_heads, kMaxHeads);
  check_positive("--seq", o.seq, kMaxSeq);
  check_positive("--seq-q", seq_q, kMaxSeq);
  check_positive("--seq-kv", seq_kv, kMaxSeq);
  check_positive("--head-dim", o.head_dim, kMaxHeadDim);
  if (o.heads % kv_heads != 0)
    throw UsageError(fmt::format("--kv-heads {} does not divide --heads {} (grouped-query attention shares each "
                                 "key/value head among the same number of query heads)",
                                 kv_heads, o.heads));
  if (causal && seq_q > seq_kv)
    throw UsageError(fmt::format("--seq-q {} is longer than --seq-kv {}: with --causal (aligned bottom-right: key j "
                                 "is visible to query i iff j <= i + seq_kv - seq_q) the first {} queries would see "
                                 "no key; use --seq-q <= --seq-kv or --no-causal",
                                 seq_q, seq_kv, seq_q - seq_kv));
  if (o.window < 0 || o.window > kMaxSeq)
    throw UsageError(o.window < 0 ? fmt::format("--window must be >= 0 keys (0: no window), got {}", o.window)
                                  : fmt::format("--window {} is too large (at most {})", o.window, kMaxSeq));
  if (o.window > 0 && !causal)
    throw UsageError(!o.window_from_shape
                         ? fmt::format("--window {} needs the causal mask (the window ends at each query's diagonal, "
                                       "bottom-right aligned); drop --no-causal or --window",
                                       o.window)
                         : fmt::format("the --shape preset's sliding window ({} keys) needs the causal mask; drop "
                                       "--no-causal, or add --window 0 for the preset without its window",
                                       o.window));
  // --page-size alone implies the paged layout; an explicit --kv-layout
  // contiguous drops a preset's pages but refuses an explicit --page-size.
  if (o.kv_layout != "contiguous" && o.kv_layout != "paged")
    throw UsageError(invalid_choice("--kv-layout", o.kv_layout, {"contiguous", "paged"}));
  const bool explicit_page_size = o.page_size && !o.page_size_from_shape;
  if (explicit_page_size) check_positive("--page-size", *o.page_size, kMaxPageSize);
  if (o.kv_layout == "contiguous" && o.kv_layout_given && explicit_page_size)
    throw UsageError(fmt::format("--page-size {} needs --kv-layout paged (contiguous K/V has no pages)", *o.page_size));
  const int64_t page_size = requested_page_size(o);  // a preset's or the default: in range
  if (page_size > 0) {
    // Named as the user asked for the pages: the preset, --kv-layout, or --page-size alone.
    const std::string asked = o.kv_layout_given ? std::string("--kv-layout paged")
                              : explicit_page_size ? fmt::format("--page-size {} (a paged KV cache)", page_size)
                                                   : std::string("the --shape preset's paged KV cache");
    if (*pass != Pass::fwd)
      throw UsageError(fmt::format("{} is the layout of an inference KV cache, which nothing differentiates: use "
                                   "--pass fwd, not {}{}",
                                   asked, o.pass,
                                   o.kv_layout_given || explicit_page_size ? "" : ", or add --kv-layout contiguous"));
  }
  if (dtype == DType::FP8) {
    // fp8 inputs are quantised per (batch, head) from dense bf16 draws; the rest is not built.
    const char* what = *pass != Pass::fwd ? "a backward pass (fp8 attention is a forward: use --pass fwd)"
                       : !seqlens.empty() ? "a variable-length batch (drop --seqlens, or use --dtype bf16)"
                       : page_size > 0    ? "a paged KV cache (use --kv-layout contiguous, or --dtype bf16)"
                                          : nullptr;
    if (what) throw UsageError(fmt::format("--dtype {} runs dense forward problems; it does not take {}", o.dtype, what));
  }
  // Each flag within its limit can still multiply past int64: q holds
  // B*Hq*Sq*D elements, k and v B*Hkv*Skv*D, and no tensor (nor address
  // space) holds 2^63 bytes.
  // A paged cache holds whole pages: the key rows round up to a page.
  const int64_t kv_rows = page_size > 0 ? (seq_kv + page_size - 1) / page_size * page_size : seq_kv;
  for (const auto& [which, heads, seq, seq_name] :
       {std::tuple{"q", o.heads, seq_q, "seq"},
        std::tuple{"k and v", kv_heads, kv_rows, page_size > 0 ? "key rows in whole pages" : "seq"}}) {
    int64_t elements = 0, bytes = 0;
    if (__builtin_mul_overflow(batch * heads, seq * o.head_dim, &elements) ||
        __builtin_mul_overflow(elements, int64_t(dtype_bytes(dtype)), &bytes))
      throw UsageError(fmt::format("shape {}x{}x{}x{} (--batch x heads x {} x --head-dim) is too large: {} would "
                                   "need {:.3g} bytes, past the 2^63-byte limit of any tensor",
                                   batch, heads, seq, o.head_dim, seq_name, which,
                                   double(batch) * double(heads) * double(seq) * double(o.head_dim) *
                                       dtype_bytes(dtype)));
  }
  p.batch = batch, p.head_dim = o.head_dim;
  p.heads_q = o.heads, p.heads_kv = kv_heads;
  p.seq_q = seq_q, p.seq_kv = seq_kv;
  p.seqlens = std::move(seqlens);
  p.varlen_padded = p.varlen() && o.varlen_layout == "padded";
  p.dtype = dtype;
  p.fp8_rotated = o.fp8_rotate;
  p.pass = *pass;
  p.mask = causal ? Mask::causal_bottom_right : Mask::none;
  p.window = o.window;
  p.page_size = page_size;
  p.seed = o.seed;
  try {
    p.device = resolve_device(o.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return p;
}

TableOptions RunSettings::table_for(const Problem& p) const {
  TableOptions t = files.table;
  t.sort_by = sort_by.value_or(p.on_cuda() ? SortKey::CudaTimeTotal : SortKey::CpuTimeTotal);
  return t;
}

RunSettings build_settings(const CliOptions& o) {
  RunSettings s;
  s.files.out_dir = o.out;
  s.files.gzip = !o.no_gzip;
  s.measure.scratch_dir = o.out;
  if (!o.sort_by.empty()) {
    const auto key = parse_sort_key(o.sort_by);
    if (!key) throw UsageError(invalid_choice("--sort-by", o.sort_by, sort_key_names()));
    s.sort_by = key;
  }
  if (o.row_limit < 0) throw UsageError(fmt::format("--row-limit must be >= 0 (0 = all rows), got {}", o.row_limit));
  s.files.table.row_limit = o.row_limit;
  s.measure.timing_iters = o.timing_iters;
  s.measure.counters = o.counters;
  s.measure.profiler = o.profiler;
  s.measure.startup_ms = o.startup_ms;
  // Limits keep a typo (--active 1000000000) from running for days; traced steps
  // are also held in memory by Kineto until the profiler stops.
  // The untraced counts may also be kAutoIters (the parser never makes it from "-1").
  for (const auto& [flag, v, max, may_be_auto] :
       {std::tuple{"--warmup-iters", o.warmup_iters, kMaxIters, true},
        std::tuple{"--timing-iters", o.timing_iters, kMaxIters, true}, std::tuple{"--wait", o.wait, kMaxSteps, false},
        std::tuple{"--warmup", o.warmup, kMaxSteps, false}, std::tuple{"--active", o.active, kMaxSteps, false}}) {
    if (v < 0 && !(may_be_auto && v == kAutoIters)) throw UsageError(fmt::format("{} must be >= 0, got {}", flag, v));
    if (v > max) throw UsageError(fmt::format("{} {} is too large (at most {})", flag, v, max));
  }
  if (o.active <= 0) throw UsageError(fmt::format("--active must be at least 1, got {}", o.active));
  s.measure.schedule = {o.warmup_iters, o.wait, o.warmup, o.active};
  return s;
}

}  // namespace attnprof::cli
