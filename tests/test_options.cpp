// The command line's problem and settings, as the library receives them:
// defaults, presets, every validation rule with its one-line message.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "attnprof/variant.h"
#include "cli/options.h"

using namespace attnprof;
using namespace attnprof::cli;

namespace {

CliOptions cpu() {
  CliOptions o;
  o.device = "cpu";
  return o;
}

std::string usage_error(const CliOptions& o) {
  try {
    build_problem(o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// Parses argv the way main() does (shape options, or the group `add` registers) into a CliOptions.
CliOptions parse(std::vector<std::string> args, void (*add)(CLI::App&, CliOptions&) = add_shape_options) {
  CliOptions o = cpu();
  CLI::App app;
  add(app, o);
  args.insert(args.begin(), "attnprof");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return o;
}

}  // namespace

TEST(Options, DefaultsAreTheSquareCausalForward) {
  const Problem p = build_problem(cpu());
  EXPECT_EQ(p.shape_string(), "8x16x1024x64");
  EXPECT_EQ(p.heads_kv, p.heads_q);
  EXPECT_EQ(p.seq_kv, p.seq_q);
  EXPECT_EQ(p.mask, Mask::causal_bottom_right);
  EXPECT_EQ(p.pass, Pass::fwd);
  EXPECT_EQ(p.file_stem(), "8_16_1024_64_bf16_causal");
}

TEST(Options, KvHeadsSeqAndPassReachTheProblem) {
  CliOptions o = cpu();
  o.heads = 32, o.kv_heads = 8, o.seq_q = 1, o.seq_kv = 4096, o.head_dim = 128, o.pass = "fwd+bwd";
  const Problem p = build_problem(o);
  EXPECT_EQ(p.heads_q, 32);
  EXPECT_EQ(p.heads_kv, 8);
  EXPECT_EQ(p.group_size(), 4);
  EXPECT_EQ(p.seq_q, 1);
  EXPECT_EQ(p.seq_kv, 4096);
  EXPECT_EQ(p.pass, Pass::fwd_bwd);
  EXPECT_EQ(p.file_stem(), "8_32_1_128_bf16_causal_hkv8_kv4096_fwdbwd");
  EXPECT_EQ(p.shape_string(), "8x32/8x1/4096x128");
}

TEST(Options, BadCombinationsNameTheValues) {
  CliOptions o = cpu();
  o.heads = 32, o.kv_heads = 5;
  EXPECT_EQ(usage_error(o).rfind("--kv-heads 5 does not divide --heads 32", 0), 0u) << usage_error(o);
  o = cpu();
  o.seq_q = 100, o.seq_kv = 50;
  EXPECT_EQ(usage_error(o).rfind("--seq-q 100 is longer than --seq-kv 50", 0), 0u) << usage_error(o);
  o.no_causal_given = true;  // without the mask every query sees every key
  EXPECT_EQ(usage_error(o), "");
  o = cpu();
  o.pass = "backward";
  EXPECT_NE(usage_error(o).find("invalid --pass 'backward' (valid: fwd, bwd, fwd+bwd"), std::string::npos);
  o = cpu();
  o.kv_heads = 0;
  EXPECT_EQ(usage_error(o), "--kv-heads must be a positive integer, got 0");
  o = cpu();
  o.seq_kv = kMaxSeq + 1;
  EXPECT_NE(usage_error(o).find("--seq-kv 4194305 is too large"), std::string::npos);
  o = cpu();
  o.batch = kMaxBatch, o.heads = kMaxHeads, o.seq = kMaxSeq, o.head_dim = kMaxHeadDim;
  EXPECT_NE(usage_error(o).find("past the 2^63-byte limit"), std::string::npos);
}

TEST(Options, PresetsApplyAndExplicitFlagsWinInAnyOrder) {
  for (const ShapePreset& s : shape_presets()) {
    const Problem p = build_problem(parse({"--shape", s.name}));
    EXPECT_EQ(p.batch, s.batch) << s.name;
    EXPECT_EQ(p.heads_q, s.heads) << s.name;
    EXPECT_EQ(p.heads_kv, s.kv_heads) << s.name;
    EXPECT_EQ(p.head_dim, s.head_dim) << s.name;
    if (s.seqlens) {  // a mix: its longest drawn length, within the preset's range
      EXPECT_EQ(p.seqlens, parse_seqlens(s.seqlens, 0)) << s.name;
      EXPECT_EQ(p.seq_kv, *std::max_element(p.seqlens.begin(), p.seqlens.end())) << s.name;
      EXPECT_LE(p.seq_kv, s.seq_kv) << s.name;
      continue;
    }
    EXPECT_EQ(p.seq_q, s.seq_q) << s.name;
    EXPECT_EQ(p.seq_kv, s.seq_kv) << s.name;
  }
  EXPECT_EQ(build_problem(parse({"--batch", "2", "--shape", "llama3-8b-decode"})).batch, 2);
  EXPECT_EQ(build_problem(parse({"--shape", "llama3-8b-decode", "--seq-kv", "100"})).seq_kv, 100);
  EXPECT_THROW(parse({"--shape", "llama9"}), CLI::ValidationError);
  // --seq means queries and keys: given with a preset it replaces both of the
  // preset's lengths (it was silently unused), in either order.
  for (const auto& args : {std::vector<std::string>{"--shape", "llama3-8b-decode", "--seq", "512"},
                           std::vector<std::string>{"--seq", "512", "--shape", "llama3-8b-decode"}}) {
    const Problem p = build_problem(parse(args));
    EXPECT_EQ(p.seq_q, 512);
    EXPECT_EQ(p.seq_kv, 512);
    EXPECT_EQ(p.heads_kv, 8) << "the preset's other fields stay";
  }
  const Problem q = build_problem(parse({"--shape", "llama3-8b-decode", "--seq", "512", "--seq-q", "4"}));
  EXPECT_EQ(q.seq_q, 4);
  EXPECT_EQ(q.seq_kv, 512);
  EXPECT_EQ(usage_error(parse({"--seq", "64", "--seq-q", "8", "--seq-kv", "128"})),
            "--seq 64 is unused when --seq-q and --seq-kv are both given; give --seq, or --seq-q / --seq-kv");
}

TEST(Options, SettingsCarryTheScheduleAndRejectNonsense) {
  CliOptions o = cpu();
  o.warmup_iters = 2, o.wait = 0, o.warmup = 2, o.active = 5, o.timing_iters = 7, o.out = "/tmp/x";
  const RunSettings s = build_settings(o);
  EXPECT_EQ(s.measure.schedule.active, 5);
  EXPECT_EQ(s.measure.timing_iters, 7);
  EXPECT_EQ(s.files.out_dir, "/tmp/x");
  EXPECT_EQ(s.table_for(build_problem(o)).sort_by, SortKey::CpuTimeTotal);
  for (auto bad : {+[](CliOptions& c) { c.active = 0; }, +[](CliOptions& c) { c.wait = -1; },
                   +[](CliOptions& c) { c.row_limit = -3; }, +[](CliOptions& c) { c.sort_by = "cuda_time_totl"; },
                   +[](CliOptions& c) { c.timing_iters = kMaxIters + 1; }}) {
    CliOptions c = cpu();
    bad(c);
    EXPECT_THROW(build_settings(c), UsageError);
  }
}

TEST(Options, VariantListsExpandThroughTheRegistry) {
  // 'all' never starts ranks: the multi-GPU variants only when asked for (--nproc, a launcher).
  std::vector<std::string> single;
  for (const auto& e : variant_registry())
    if (!e.has(VariantTag::multi_gpu)) single.push_back(e.name);
  EXPECT_EQ(expand_variants({"all"}), single);
  EXPECT_EQ(expand_variants({"all"}, /*multi_gpu=*/true), variants_tagged(VariantTag::multi_gpu));
  EXPECT_FALSE(variants_tagged(VariantTag::multi_gpu).empty());
  EXPECT_EQ(expand_variants({"ring-custom-flash"}), (std::vector<std::string>{"ring-custom-flash"}))
      << "named, a multi-GPU variant is kept (and refused with its reason without ranks)";
  EXPECT_EQ(expand_variants({"inplace", "naive", "inplace"}), (std::vector<std::string>{"inplace", "naive"}));
  try {
    expand_variants({"nave"});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'naive'"), std::string::npos) << e.what();
  }
}

TEST(Options, IterationCountsTakeAutoOrADecimalCount) {
  auto parse_run = [](std::vector<std::string> args) { return parse(std::move(args), add_run_options); };
  const CliOptions defaults = parse_run({});
  EXPECT_EQ(defaults.warmup_iters, kAutoIters);
  EXPECT_EQ(defaults.timing_iters, kAutoIters);
  EXPECT_FALSE(defaults.quiet);
  const RunSettings s = build_settings(defaults);
  EXPECT_EQ(s.measure.schedule.warmup_iters, kAutoIters) << "auto reaches the runner as kAutoIters";
  EXPECT_EQ(s.measure.timing_iters, kAutoIters);

  const CliOptions set = parse_run({"--warmup-iters", "0", "--timing-iters", "7", "-q"});
  EXPECT_EQ(set.warmup_iters, 0);
  EXPECT_EQ(set.timing_iters, 7);
  EXPECT_TRUE(set.quiet);
  EXPECT_EQ(parse_run({"--timing-iters", "auto"}).timing_iters, kAutoIters);
  EXPECT_THROW(parse_run({"--timing-iters", "5", "--timing-iters", "auto"}), CLI::ParseError) << "given twice";

  for (const char* bad : {"-1", "+5", " 5", "0x10", "1e3", "3.0", "", "-", "aut", "1000001", "99999999999999999999"}) {
    try {
      parse_run({"--timing-iters", bad});
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const CLI::ValidationError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--timing-iters ", 0), 0u) << what;
      EXPECT_NE(what.find(bad), std::string::npos) << what;
    }
  }
  // Set in code rather than parsed, -1 is auto and other negatives are refused.
  CliOptions o = cpu();
  o.warmup_iters = -2;
  EXPECT_THROW(build_settings(o), UsageError);
}

// A sweep axis given twice, or a value repeated, is one point per value.
TEST(Options, ListOptionsDropRepeatedValues) {
  CLI::App app;
  std::vector<int64_t> seqs;
  std::vector<std::string> names;
  add_integer_list_option(app, "--seq", seqs, "");
  add_name_list_option(app, "--variant", names, "");
  std::vector<std::string> args = {"attnprof", "--seq", "512,1024,512", "--seq", "1024,2048",
                                   "--variant", "naive,inplace", "--variant", "naive"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(seqs, (std::vector<int64_t>{512, 1024, 2048}));
  EXPECT_EQ(names, (std::vector<std::string>{"naive", "inplace"}));
}

// --window: the problem carries it, names it, counts only the pairs inside it;
// nonsense and a window without the causal mask are refused with the values.
TEST(Options, WindowReachesTheProblemAndIsCheckedAgainstTheMask) {
  CliOptions o = cpu();
  o.seq = 4096, o.window = 1024;
  const Problem p = build_problem(o);
  EXPECT_EQ(p.window, 1024);
  EXPECT_TRUE(p.windowed());
  EXPECT_EQ(p.file_stem(), "8_16_4096_64_bf16_causal_w1024");
  EXPECT_EQ(p.config_string(), "bf16 causal window 1024");
  o.window = 4096;  // as wide as the sequence: hides nothing, named as the causal problem it is
  EXPECT_FALSE(build_problem(o).windowed());
  EXPECT_EQ(build_problem(o).file_stem(), "8_16_4096_64_bf16_causal");
  o.window = -3;
  EXPECT_EQ(usage_error(o), "--window must be >= 0 keys (0: no window), got -3");
  o.window = kMaxSeq + 1;
  EXPECT_NE(usage_error(o).find("--window 4194305 is too large"), std::string::npos) << usage_error(o);
  o.window = 128, o.no_causal_given = true;
  EXPECT_EQ(usage_error(o).rfind("--window 128 needs the causal mask", 0), 0u) << usage_error(o);
  // The preset carries the model's window; an explicit --window replaces it in either order.
  EXPECT_EQ(build_problem(parse({"--shape", "mistral-7b-window"})).window, 4096);
  EXPECT_EQ(build_problem(parse({"--window", "512", "--shape", "mistral-7b-window"})).window, 512);
  EXPECT_EQ(build_problem(parse({"--shape", "mistral-7b-window", "--window", "0"})).window, 0);
  CliOptions preset = parse({"--shape", "mistral-7b-window"});
  preset.no_causal_given = true;
  EXPECT_EQ(usage_error(preset).rfind("the --shape preset's sliding window (4096 keys) needs the causal mask", 0), 0u)
      << usage_error(preset);
  EXPECT_THROW(parse({"--window", "1e3"}), CLI::ValidationError);
}

// --kv-layout / --page-size: the problem carries the page size and names it;
// --page-size alone means paged; a paged cache is forward-only; nonsense is
// refused with the value; the preset's pages give way to an explicit layout.
TEST(Options, PagedLayoutReachesTheProblemAndIsChecked) {
  const Problem p = build_problem(parse({"--kv-layout", "paged", "--seq-q", "1", "--seq-kv", "100"}));
  EXPECT_EQ(p.page_size, kDefaultPageSize);
  EXPECT_TRUE(p.paged());
  EXPECT_EQ(p.pages_per_sequence(), 7);
  EXPECT_EQ(p.file_stem(), "8_16_1_64_bf16_causal_kv100_p16");
  EXPECT_EQ(p.config_string(), "bf16 causal paged 16");
  EXPECT_EQ(build_problem(parse({"--page-size", "64"})).page_size, 64) << "--page-size alone implies paged";
  EXPECT_EQ(build_problem(parse({"--page-size", "64", "--kv-layout", "paged"})).page_size, 64);
  EXPECT_EQ(build_problem(parse({"--page-size", "48"})).page_size, 48) << "the CLI takes any size; kernels say";
  EXPECT_FALSE(build_problem(parse({})).paged());
  EXPECT_EQ(build_problem(parse({})).file_stem().find("_p"), std::string::npos);
  EXPECT_EQ(usage_error(parse({"--kv-layout", "pagd"})),
            "invalid --kv-layout 'pagd' (valid: contiguous, paged; did you mean 'paged'?)");
  EXPECT_EQ(usage_error(parse({"--kv-layout", "contiguous", "--page-size", "16"})),
            "--page-size 16 needs --kv-layout paged (contiguous K/V has no pages)");
  EXPECT_EQ(usage_error(parse({"--page-size", "0"})), "--page-size must be a positive integer, got 0");
  EXPECT_NE(usage_error(parse({"--page-size", "65537"})).find("--page-size 65537 is too large"), std::string::npos);
  EXPECT_EQ(usage_error(parse({"--kv-layout", "paged", "--pass", "bwd"})).rfind("--kv-layout paged is the layout of "
                                                                                 "an inference KV cache", 0),
            0u);
  // Each names what the user asked for the pages with.
  EXPECT_EQ(usage_error(parse({"--page-size", "8", "--pass", "bwd"})).rfind("--page-size 8 (a paged KV cache) is", 0),
            0u);
  EXPECT_EQ(usage_error(parse({"--shape", "llama3-8b-paged-decode", "--pass", "fwd+bwd"})),
            "the --shape preset's paged KV cache is the layout of an inference KV cache, which nothing differentiates: "
            "use --pass fwd, not fwd+bwd, or add --kv-layout contiguous");
  EXPECT_EQ(usage_error(parse({"--kv-layout", "contiguous", "--page-size", "-1"})),
            "--page-size must be a positive integer, got -1");
  EXPECT_THROW(parse({"--page-size", "0x10"}), CLI::ValidationError);
  // The preset's pages; an explicit layout or page size replaces them in either order.
  const Problem preset = build_problem(parse({"--shape", "llama3-8b-paged-decode"}));
  EXPECT_EQ(preset.page_size, 16);
  EXPECT_EQ(preset.seq_kv, 32768);
  EXPECT_EQ(build_problem(parse({"--shape", "llama3-8b-paged-decode", "--kv-layout", "contiguous"})).page_size, 0);
  EXPECT_EQ(build_problem(parse({"--kv-layout", "contiguous", "--shape", "llama3-8b-paged-decode"})).page_size, 0);
  EXPECT_EQ(build_problem(parse({"--page-size", "256", "--shape", "llama3-8b-paged-decode"})).page_size, 256);
  // A pool of whole pages past 2^63 bytes is refused before anything is allocated.
  EXPECT_NE(usage_error(parse({"--batch", "1048576", "--heads", "65536", "--seq", "1", "--head-dim", "4096",
                               "--page-size", "65536"}))
                .find("too large"),
            std::string::npos);
}

// visible_pairs under a window that hides keys against a count of the pairs
// one by one (the diagonal counted half, FlashAttention's q*k - q^2/2
// convention for causal), and meeting the causal count at window = seq_kv, on
// square, chunked and decode problems and windows from 1 to past the keys.
TEST(Options, WindowedVisiblePairsCountTheKeysInsideTheWindow) {
  for (const auto& [sq, skv] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {100, 100}, {37, 300}, {1, 300}}) {
    for (int64_t w : {1, 2, 17, 36, 37, 99, 100, 101, 299, 300, 1000}) {
      Problem p;
      p.seq_q = sq, p.seq_kv = skv, p.window = w;
      // Each pair inside the window, the diagonal's counted half (as the causal count does).
      double count = 0;
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j)
          if (j <= i + skv - sq && j > i + skv - sq - w) count += j == i + skv - sq ? 0.5 : 1.0;
      EXPECT_DOUBLE_EQ(p.visible_pairs(), count) << sq << "x" << skv << " window " << w;
      if (!p.windowed()) EXPECT_GE(w, skv);
    }
  }
}

// --seqlens: a list or a seeded mix sets the batch and the longest key length;
// queries are every token (prefill) or, with --seq-q N or a decode preset, each
// sequence's last N; every clash with another flag is one line naming it.
TEST(Options, SeqlensMakeAVariableLengthBatch) {
  const Problem p = build_problem(parse({"--seqlens", "5,300,1,77", "--heads", "4", "--kv-heads", "2"}));
  EXPECT_EQ(p.seqlens, (std::vector<int64_t>{5, 300, 1, 77}));
  EXPECT_EQ(p.batch, 4);
  EXPECT_EQ(p.seq_kv, 300);
  EXPECT_EQ(p.seq_q, 300) << "prefill: as many queries as keys";
  EXPECT_EQ(p.q_len(0), 5);
  EXPECT_EQ(p.q_len(2), 1);
  EXPECT_EQ(p.total_q(), 383);
  EXPECT_EQ(p.total_kv(), 383);
  EXPECT_EQ(p.config_string(), "bf16 causal varlen 1-300");
  EXPECT_NE(p.file_stem().find("_vl4-"), std::string::npos) << p.file_stem();
  // The stem names the lengths: another list, another name; the same list, the same.
  const auto lengths_part = [](const Problem& q) { return q.file_stem().substr(q.file_stem().find("_vl")); };
  EXPECT_NE(lengths_part(build_problem(parse({"--seqlens", "5,300,1,78"}))), lengths_part(p));
  EXPECT_EQ(lengths_part(build_problem(parse({"--seqlens", "5,300,1,77", "--heads", "8"}))), lengths_part(p));
  // Decode against per-sequence cache lengths.
  const Problem decode = build_problem(parse({"--seqlens", "9,40,17", "--seq-q", "1"}));
  EXPECT_EQ(decode.seq_q, 1);
  EXPECT_EQ(decode.q_len(1), 1);
  EXPECT_EQ(decode.kv_len(1), 40);
  EXPECT_EQ(decode.total_q(), 3);
  EXPECT_EQ(build_problem(parse({"--shape", "llama3-8b-decode", "--seqlens", "100,8000"})).seq_q, 1)
      << "a decode preset's one query per sequence";
  EXPECT_EQ(build_problem(parse({"--seqlens", "4,4", "--batch", "2"})).batch, 2) << "an agreeing --batch is fine";
  // --varlen-layout padded: every variant the padded batch; named in the stem and the configuration.
  EXPECT_FALSE(p.varlen_padded) << "packed where a variant can, by default";
  const Problem padded = build_problem(
      parse({"--seqlens", "5,300,1,77", "--heads", "4", "--kv-heads", "2", "--varlen-layout", "padded"}));
  EXPECT_TRUE(padded.varlen_padded);
  EXPECT_EQ(padded.config_string(), "bf16 causal varlen 1-300 padded");
  EXPECT_EQ(padded.file_stem(), p.file_stem() + "-padded");
  EXPECT_FALSE(build_problem(parse({"--seqlens", "5,3", "--varlen-layout", "packed"})).varlen_padded);
  EXPECT_TRUE(build_problem(parse({"--shape", "varlen-prefill", "--varlen-layout", "padded"})).varlen_padded);
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--varlen-layout", "ragged"})),
            "invalid --varlen-layout 'ragged' (valid: packed, padded)");
  EXPECT_EQ(usage_error(parse({"--varlen-layout", "padded"})),
            "--varlen-layout padded needs a variable-length batch: add --seqlens (or a varlen --shape preset)");
  // Refusals, each naming the values.
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5,6", "--batch", "8"})),
            "--batch 8 differs from the 3 sequences --seqlens lists; drop --batch (the lengths set the batch)");
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--seq", "64"})).rfind("--seq 64 is unused with --seqlens", 0), 0u);
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--seq-kv", "64"})).rfind("--seq-kv 64 is unused", 0), 0u);
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,50", "--seq-q", "8"})),
            "--seq-q 8 is more than the shortest sequence of --seqlens (4 keys): each sequence's last 8 tokens are "
            "its queries; use --seq-q <= 4");
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--pass", "bwd"})),
            "a variable-length batch (--seqlens) runs the forward only for now: use --pass fwd, not bwd");
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--page-size", "16"}))
                .rfind("a variable-length batch (--seqlens) with a paged KV cache is not built yet", 0),
            0u);
  // A refusal a preset causes names the preset, not a flag the user never typed.
  EXPECT_EQ(usage_error(parse({"--shape", "llama3-8b-chunked-prefill", "--seqlens", "5,600"})),
            "the --shape preset's 512 queries per sequence are more than the shortest sequence of --seqlens (5 "
            "keys); add --seq-q N with N <= 5");
  EXPECT_EQ(usage_error(parse({"--shape", "llama3-8b-paged-decode", "--seqlens", "5,6"})),
            "the --shape preset's paged KV cache with a variable-length batch (--seqlens) is not built yet: add "
            "--kv-layout contiguous");
  EXPECT_EQ(usage_error(parse({"--shape", "varlen-prefill", "--pass", "bwd"})),
            "the --shape preset's variable-length batch runs the forward only for now: use --pass fwd, not bwd");
  EXPECT_EQ(usage_error(parse({"--seqlens", "4,5", "--batch", "0"})), "--batch must be a positive integer, got 0");
  // Thousands of lengths: the line shows the start and the size, not the whole value.
  std::string many(20000, '7');
  const std::string long_error = usage_error(parse({"--seqlens", "mix:" + many}));
  EXPECT_LT(long_error.size(), 400u) << long_error.size();
  EXPECT_NE(long_error.find("(20004 characters)"), std::string::npos) << long_error;
  EXPECT_NE(usage_error(parse({"--seqlens", "mix:4x-1-5"})).find("the shortest length is missing"), std::string::npos);
  for (const char* bad : {"", "4,,5", "4,", "0,5", "4,x", "010", "mix:", "mix:4x", "mix:4x10", "mix:0x1-5",
                          "mix:4x9-3", "mix:4x1-4194305", "mix:4097x1-5", "1e3"}) {
    const std::string e = usage_error(parse({"--seqlens", bad}));
    EXPECT_EQ(e.rfind(std::string("invalid --seqlens '") + bad + "': ", 0), 0u) << bad << ": " << e;
    EXPECT_NE(e.find("mix:NxLO-HI"), std::string::npos) << "the forms are named: " << e;
  }
  EXPECT_NE(usage_error(parse({"--seqlens", "4194305"})).find("length 4194305 is outside 1..4194304"),
            std::string::npos);
}

// A mix is the same on every run with the same --seed (and machine: splitmix64),
// another seed draws other lengths, every length in range.
TEST(Options, SeqlensMixIsSeededAndInRange) {
  const std::vector<int64_t> a = parse_seqlens("mix:16x128-8192", 7), b = parse_seqlens("mix:16x128-8192", 7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, parse_seqlens("mix:16x128-8192", 8));
  ASSERT_EQ(a.size(), 16u);
  for (int64_t n : a) EXPECT_TRUE(n >= 128 && n <= 8192) << n;
  EXPECT_EQ(parse_seqlens("mix:3x5-5", 1), (std::vector<int64_t>{5, 5, 5}));
  // Spread: 4096 draws of 1..4 hit every value.
  const std::vector<int64_t> many = parse_seqlens("mix:4096x1-4", 3);
  for (int64_t v = 1; v <= 4; ++v) EXPECT_NE(std::find(many.begin(), many.end(), v), many.end()) << v;
  const Problem preset = build_problem(parse({"--shape", "varlen-prefill"}));
  EXPECT_EQ(preset.batch, 16);
  EXPECT_EQ(preset.seqlens, parse_seqlens("mix:16x128-8192", 0));
  EXPECT_EQ(preset.seq_q, preset.seq_kv);
}

// FLOPs count real tokens: a variable-length batch's visible pairs are the mean
// of its sequences' own counts; the padding share is what a padded batch wastes.
TEST(Options, VariableLengthFlopsCountRealTokensOnly) {
  Problem p;
  p.batch = 3, p.seqlens = {10, 1, 40}, p.seq_q = p.seq_kv = 40;
  double pairs = 0, real = 0;
  for (int64_t n : p.seqlens) pairs += double(n) * n - double(n) * n / 2.0, real += double(n) * n;
  EXPECT_DOUBLE_EQ(p.visible_pairs(), pairs / 3);
  EXPECT_DOUBLE_EQ(p.padding_share(), 1.0 - real / (3.0 * 40 * 40));
  p.mask = Mask::none;
  EXPECT_DOUBLE_EQ(p.visible_pairs(), real / 3);
  p.seq_q = 1;  // decode: one query per sequence against its keys
  EXPECT_DOUBLE_EQ(p.visible_pairs(), (10 + 1 + 40) / 3.0);
  p.seqlens.clear();
  EXPECT_DOUBLE_EQ(p.padding_share(), 0.0);
}
