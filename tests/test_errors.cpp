// Every bad input the attnprof executable meets, one table row each: the exit
// code README.md documents ("Errors and exit codes"), exactly one line on
// stderr that names the bad value, and nothing (file, temp, directory, lock)
// left behind. Runs the real executable on the CPU with tiny shapes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "attnprof/device.h"
#include "test_util.h"

using namespace attnprof::testing;
namespace io = attnprof::io;
using nlohmann::json;

namespace {

constexpr const char* kTiny = "--device cpu --batch 1 --heads 2 --seq 33 --head-dim 32";

using Result = attnprof::testing::CliResult;

// A real summary from a real run, made once per process and only for the
// compare cases that need one.
const std::string& good_summary_text() {
  static const std::string text = [] {
    const std::string d = make_temp_dir("errors_good");
    const Result r = run_cli(std::string(kTiny) + " --variant naive --timing-iters 0 --out " + d);
    std::string t;
    if (r.rc == 0) t = io::read_file(d + "/naive/1_2_33_32_bf16_causal.summary.json");
    remove_tree(d);
    return t;
  }();
  return text;
}

std::string good_with(const std::function<void(json&)>& edit) {
  json j = json::parse(good_summary_text());
  edit(j);
  return j.dump(1);
}

// Input files a case needs, written into its temp dir before it runs (those
// that are not written stay missing on purpose).
// A file, or (no bytes) a FIFO, or (link_to) a symbolic link.
struct Fixture {
  std::string name;
  std::function<std::string()> bytes;
  std::string link_to = "";
};

struct Case {
  const char* name;
  std::string args;  // "{D}" is the case's temp dir
  int rc;
  std::vector<std::string> needles;  // each must appear in the error line
  std::vector<Fixture> files = {};
  bool needs_no_gpu = false;
  std::vector<std::string> forbidden = {};  // none may appear (a value never typed)
};

// The table, one group per kind of bad input; each group is one test, its
// cases run in turn (one ctest entry per group, not per case).
struct Group {
  const char* name;
  std::vector<Case> cases;
};

Fixture good(const std::string& name = "good.summary.json") { return {name, [] { return good_summary_text(); }}; }
Fixture fifo(const std::string& name) { return {name, nullptr}; }

// "1,2,...,n" from a to b.
std::string range_list(int a, int b) {
  std::string s;
  for (int i = a; i <= b; ++i) s += (i > a ? "," : "") + std::to_string(i);
  return s;
}
// A relative path of `bytes` bytes in 100-byte components.
std::string long_path(size_t bytes) {
  std::string p;
  while (p.size() < bytes) p += (p.empty() ? "" : "/") + std::string(99, 'd');
  return p;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

// The tiny CPU problem, less the flags the case sets itself.
std::string profile(const std::string& args) {
  std::set<std::string> given;
  for (size_t p = 0; p < args.size();) {
    const size_t sp = std::min(args.find(' ', p), args.size());
    given.insert(args.substr(p, sp - p));
    p = sp + 1;
  }
  std::string out;
  for (const auto& [flag, value] : {std::pair{"--device", "cpu"}, {"--batch", "1"}, {"--heads", "2"},
                                    {"--seq", "33"}, {"--head-dim", "32"}})
    if (!given.count(flag)) out += std::string(flag) + " " + value + " ";
  return out + "--out {D}/out " + args;
}
std::string compare(const std::string& a, const std::string& b, const std::string& more = "") {
  return "compare {D}/" + a + " {D}/" + b + (more.empty() ? "" : " " + more);
}

const std::vector<Group>& groups() {
  static const std::vector<Group> all = {
      {"Choices",  // choices: list the valid ones, suggest the closest
       {
      {"UnknownVariant", profile("--variant nave"), 2, {"--variant 'nave'", "did you mean 'naive'"}},
      {"MisspeltVariant", profile("--variant sdpa-flsh"), 2, {"'sdpa-flsh'", "did you mean 'sdpa-flash'"}},
      {"UnknownVariantInList", profile("--variant naive,,bogus"), 2, {"'bogus'", "valid: naive"}},
      {"VariantListOfNothing", profile("--variant ,"), 2, {"--variant ','", "names no variant"}},
      {"VariantValueMissingBeforeFlag", "--variant --seq 4 --out {D}/out", 2, {"--variant", "'--seq'"}},
      {"VariantValueMissingAtEnd", profile("--variant"), 2, {"--variant"}},
      {"UnknownDtype", profile("--dtype fp12"), 2, {"--dtype 'fp12'", "bf16, fp16, fp32, fp8"}},
      {"EmptyDtype", profile("--dtype ''"), 2, {"--dtype ''"}},
      {"Fp8E5m2", profile("--dtype e5m2"), 2, {"--dtype e5m2", "e4m3 inputs (--dtype fp8)"}},
      {"Fp8Backward", profile("--dtype fp8 --pass bwd"), 2, {"--dtype fp8", "backward pass", "--pass fwd"}},
      {"Fp8Varlen", "--device cpu --dtype fp8 --seqlens 3,5 --out {D}/out", 2, {"--dtype fp8", "variable-length batch"}},
      {"Fp8Paged", profile("--dtype fp8 --kv-layout paged"), 2, {"--dtype fp8", "paged KV cache"}},
      {"Fp8RotateWithoutFp8", profile("--fp8-rotate"), 2, {"--fp8-rotate", "needs --dtype fp8, not --dtype bf16"}},
      {"UnknownDevice", profile("--device tpu"), 2, {"--device 'tpu'", "cuda:N"}},
      {"CudaOrdinalNotANumber", profile("--device cuda:abc"), 2, {"'cuda:abc'"}},
      {"CudaOrdinalNegative", profile("--device cuda:-1"), 2, {"'cuda:-1'"}},
      {"CudaOrdinalBeyondDevices", profile("--device cuda:99"), 2, {"cuda:99"}},
      {"CudaWithoutGpu", profile("--device cuda"), 2, {"--device cuda", "no CUDA device"}, {}, true},
      {"UnknownSortKey", profile("--sort-by cpu_tme"), 2, {"--sort-by 'cpu_tme'", "did you mean 'cpu_time'"}},
      {"ListVariantsWithBadDtype", "--list-variants --device cpu --dtype fp4", 2, {"--dtype 'fp4'"}},
       }},
      {"Sizes",  // sizes: non-numeric, zero, negative, past the limits, overflowing products
       {
      {"BatchNotANumber", profile("--batch abc"), 2, {"--batch", "abc"}},
      {"HeadsInScientificNotation", profile("--heads 1e3"), 2, {"--heads", "1e3"}},
      {"HeadDimFractional", profile("--head-dim 3.5"), 2, {"--head-dim", "3.5"}},
      {"SeqZero", profile("--seq 0"), 2, {"--seq must be a positive integer, got 0"}},
      {"BatchNegative", profile("--batch -3"), 2, {"--batch must be a positive integer, got -3"}},
      {"HeadsZero", profile("--heads 0"), 2, {"--heads", "got 0"}},
      {"HeadDimNegative", profile("--head-dim -1"), 2, {"--head-dim", "got -1"}},
      {"SeqHuge", profile("--seq 99999999999"), 2, {"--seq 99999999999 is too large"}},
      {"SeqPastInt64", profile("--seq 99999999999999999999999"), 2, {"--seq", "99999999999999999999999"}},
      {"SeqBelowInt64", profile("--seq -99999999999999999999999"), 2, {"--seq", "-99999999999999999999999"}},
      {"BatchOverLimit", profile("--batch 1048577"), 2, {"--batch 1048577", "at most 1048576"}},
      {"HeadDimOverLimit", profile("--head-dim 4097"), 2, {"--head-dim 4097", "at most 4096"}},
      {"ElementCountOverflows", profile("--batch 1048576 --heads 65536 --seq 4194304 --head-dim 4096"), 2,
       {"1048576x65536x4194304x4096", "too large"}},
      {"SeqGivenTwice", profile("--seq 33 --seq 34"), 2, {"--seq"}},
      {"BatchCommaList", profile("--batch 1,2"), 2, {"--batch", "1,2"}},
       }},
      {"ScheduleAndTable",  // schedule and table flags
       {
      {"RowLimitNegative", profile("--row-limit -1"), 2, {"--row-limit", "got -1"}},
      {"RowLimitPastInt", profile("--row-limit 99999999999"), 2, {"--row-limit", "99999999999"}},
      {"ActiveZero", profile("--active 0"), 2, {"--active must be at least 1, got 0"}},
      {"ActiveHuge", profile("--active 1000000000"), 2, {"--active 1000000000 is too large"}},
      {"WaitNegative", profile("--wait -1"), 2, {"--wait must be >= 0, got -1"}},
      {"WarmupNegative", profile("--warmup -2"), 2, {"--warmup must be >= 0, got -2"}},
      {"WarmupItersNegative", profile("--warmup-iters -1"), 2, {"--warmup-iters must be >= 0, got -1"}},
      {"TimingItersNegative", profile("--timing-iters -5"), 2, {"--timing-iters", "-5"}},
      {"SeedNegative", profile("--seed -1"), 2, {"--seed", "-1"}},
      {"SeedNotANumber", profile("--seed abc"), 2, {"--seed", "abc"}},
      {"PeakTflopsZero", profile("--peak-tflops 0"), 2, {"--peak-tflops: must be a positive number, got 0"}},
      {"PeakTflopsNotANumber", profile("--peak-tflops fast"), 2, {"--peak-tflops", "got fast"}},
       }},
      {"Parsing",  // integers are decimal only, the value as typed; flags that contradict each other
       {
      {"SeqOctalLooking", profile("--seq 010"), 2, {"--seq", "'010'", "leading zero"}},
      {"HeadDimLeadingZero", profile("--head-dim 08"), 2, {"--head-dim", "'08'"}},
      {"SeqHex", profile("--seq 0x10"), 2, {"--seq", "'0x10'", "not a decimal integer"}},
      {"SeqPlusSign", profile("--seq +5"), 2, {"--seq", "'+5'"}},
      {"SeqLeadingSpace", profile("--seq ' 5'"), 2, {"--seq", "' 5'"}},
      {"SeqFraction", profile("--seq 5.0"), 2, {"--seq", "'5.0'"}},
      {"SeqTwentyDigits", profile("--seq 99999999999999999999"), 2, {"--seq", "'99999999999999999999'", "out of range"},
       {}, false, {"9223372036854775807"}},
      {"WarmupOctal", profile("--warmup 010"), 2, {"--warmup", "'010'"}},
      {"RowLimitPlusSign", profile("--row-limit +3"), 2, {"--row-limit", "'+3'"}},
      {"SeedHex", profile("--seed 0x1"), 2, {"--seed", "'0x1'"}},
      {"TimingItersMinusOne", profile("--timing-iters -1"), 2, {"--timing-iters must be >= 0", "got -1"}},
      {"CausalAndNoCausal", profile("--causal --no-causal"), 2, {"--causal and --no-causal"}},
       }},
      {"CommandLine",  // command-line shape
       {
      {"UnknownFlag", profile("--bogus"), 2, {"--bogus"}},
      {"StrayPositional", profile("stray"), 2, {"stray"}},
      {"FlagValueMissing", profile("--row-limit"), 2, {"--row-limit"}},
      {"SweepSeqZero", "sweep --device cpu --seq 0 --out {D}/out", 2, {"--seq", "got 0"}},
      {"SweepUnknownVariant", "sweep --device cpu --variant nave --out {D}/out", 2, {"'nave'", "did you mean 'naive'"}},
      {"SweepUnknownDtype", "sweep --device cpu --dtype fp12 --out {D}/out", 2, {"'fp12'"}},
      {"SweepFp8RotateWithoutFp8", "sweep --device cpu --dtype bf16,fp16 --fp8-rotate --out {D}/out", 2,
       {"--fp8-rotate", "needs fp8 among --dtype"}},
       }},
      {"Subcommands",  // options before a subcommand, comma lists, sweep size
       {
      {"OptionsBeforeSweep", "--variant naive --out {D}/x sweep --device cpu --seq 16 --out {D}/out", 2,
       {"--variant, --out given before 'sweep'"}},
      {"OptionBeforeCompare", "--seq 32 compare {D}/a {D}/b", 2, {"--seq given before 'compare'"}},
      // Moving an option sweep does not take after it would not help: the line says so instead.
      {"OptionSweepDoesNotTake", "--seqlens 5,40 sweep --device cpu --seq 16 --out {D}/out", 2,
       {"--seqlens given before 'sweep', which does not take --seqlens (see attnprof sweep --help)"}},
      {"SweepSeqOfNothing", "sweep --device cpu --seq , --out {D}/out", 2, {"--seq ','", "names no value"}},
      {"SweepVariantOfNothing", "sweep --device cpu --variant , --out {D}/out", 2, {"--variant ','", "names no variant"}},
      {"SweepSeqValueMissingBeforeFlag", "sweep --device cpu --seq --out {D}/out", 2, {"--seq needs a value before '--out'"}},
      {"SweepSeqOctalItem", "sweep --device cpu --seq 16,010 --out {D}/out", 2, {"--seq", "'010'"}},
      {"SweepSeqTwentyDigits", "sweep --device cpu --seq 99999999999999999999 --out {D}/out", 2,
       {"--seq", "'99999999999999999999'"}, {}, false, {"9223372036854775807"}},
      {"SweepPastDefaultLimit", "sweep --device cpu --variant naive --seq " + range_list(1, 40) + " --head-dim " +
       range_list(1, 30) + " --out {D}/out", 2, {"1200 configurations", "exceed --max-points 1000", "--max-points 1200"}},
      {"SweepPastGivenLimit", "sweep --device cpu --variant naive --seq 16,32 --max-points 1 --out {D}/out", 2,
       {"2 configurations", "exceed --max-points 1"}},
      {"SweepMaxPointsZero", "sweep --device cpu --max-points 0 --out {D}/out", 2, {"--max-points", "out of range"}},
      // Each value of a sweep axis is checked as the single-run flag is.
      {"SweepSeqZeroAmongOthers", "sweep --device cpu --seq 0,64 --out {D}/out", 2,
       {"--seq must be a positive integer, got 0"}},
      {"SweepHeadDimPastLimitAmongOthers", "sweep --device cpu --head-dim 64,4097 --out {D}/out", 2,
       {"--head-dim 4097 is too large (at most 4096)"}},
      {"SweepKvHeadsZero", "sweep --device cpu --kv-heads 0 --out {D}/out", 2, {"--kv-heads must be a positive integer"}},
      {"SweepSeqQNegative", "sweep --device cpu --seq-q -1 --seq-kv 64 --out {D}/out", 2, {"--seq-q", "-1"}},
      {"SweepSeqEmptyItem", "sweep --device cpu --seq 32,,64 --out {D}/out", 2, {"--seq '32,,64'", "empty item"}},
      {"SweepSeqTrailingComma", "sweep --device cpu --seq 32, --out {D}/out", 2, {"--seq '32,'", "empty item"}},
      {"SweepBatchLeadingComma", "sweep --device cpu --batch ,2 --out {D}/out", 2, {"--batch ',2'", "empty item"}},
       }},
      {"Outputs",  // outputs that cannot be written
       {
      {"OutIsAFile", std::string(kTiny) + " --out {D}/a_file", 4, {"{D}/a_file", "not a directory"},
       {{"a_file", [] { return std::string("not a directory"); }}}},
      {"OutUnderAFile", std::string(kTiny) + " --out {D}/a_file/sub", 4, {"{D}/a_file/sub", "not a directory"},
       {{"a_file", [] { return std::string("not a directory"); }}}},
      {"OutUnderDevFull", std::string(kTiny) + " --out /dev/full/x", 4, {"/dev/full"}},
      {"OutUnderProc", std::string(kTiny) + " --out /proc/attnprof_cannot_exist", 4, {"/proc/attnprof_cannot_exist"}},
      {"OutEmpty", std::string(kTiny) + " --out ''", 4, {"output directory", "empty"}},
       }},
      {"SpecialPaths",  // paths that are not plain: too long, control characters, directories where files go, FIFOs, devices
       {
      {"OutPastPathMax", std::string(kTiny) + " --out {D}/" + long_path(5000), 4, {"longer than the system's limit"}},
      {"OutNameTooLong", std::string(kTiny) + " --out {D}/" + std::string(300, 'n'), 4, {"limit of 255 bytes"}},
      {"OutNamedWithEscapeIsAFile", std::string(kTiny) + " --out \"{D}/esc$(printf '\\033')[31m\"", 4,
       {"esc\\x1b[31m", "not a directory"}, {{"esc\x1b[31m", [] { return std::string("a file"); }}}},
      {"OutNamedWithNewlineIsAFile", std::string(kTiny) + " --out \"{D}/a$(printf '\\nb')\"", 4,
       {"a\\x0ab", "not a directory"}, {{"a\nb", [] { return std::string("a file"); }}}},
      {"SummaryPathIsADirectory", profile("--variant naive --timing-iters 0"), 4,
       {"1_2_33_32_bf16_causal.summary.json", "directory"},
       {{"out/naive/1_2_33_32_bf16_causal.summary.json/.keep", [] { return std::string(); }}}},
      {"TablePathIsADirectory", profile("--variant naive --timing-iters 0"), 4, {"1_2_33_32_bf16_causal.txt", "directory"},
       {{"out/naive/1_2_33_32_bf16_causal.txt/.keep", [] { return std::string(); }}}},
      {"CompareInputFifoWithoutWriter", compare("in.fifo", "good.summary.json"), 4, {"in.fifo", "a FIFO with no writer"},
       {good(), fifo("in.fifo")}},
      {"CompareInputCharacterDevice", "compare /dev/zero {D}/good.summary.json", 4, {"/dev/zero", "character device"},
       {good()}},
      {"CompareCsvFifoWithoutReader", compare("good.summary.json", "good.summary.json", "--csv {D}/out.csv"), 4,
       {"out.csv", "no process is reading"}, {good(), fifo("out.csv")}},
      {"CompareCsvIsADirectoryMdNotWritten",
       compare("good.summary.json", "good.summary.json", "--csv {D}/csvdir --md {D}/diff.md"), 4, {"csvdir", "directory"},
       {good(), {"csvdir/.keep", [] { return std::string(); }}}},
      {"CompareCsvDanglingLink", compare("good.summary.json", "good.summary.json", "--csv {D}/link.csv"), 4,
       {"link.csv", "symbolic link to a missing file"}, {good(), {"link.csv", nullptr, "nowhere"}}},
       }},
      {"Unsupported",  // the one requested variant cannot run here
       {
      {"CudaOnlyVariantOnCpu", profile("--variant sdpa-cudnn"), 3, {"sdpa-cudnn cannot run here"}},
      // Several, none of which can run: the same, decided before anything runs.
      {"NoneOfSeveralVariantsOnCpu", profile("--variant sdpa-cudnn,sdpa-efficient"), 3,
       {"none of the 2 variants can run here", "sdpa-cudnn: ", "sdpa-efficient: "}, {}, true},
      {"NoneOfSeveralVariantsInASweep", "sweep --device cpu --variant sdpa-cudnn,sdpa-efficient --seq 16 --head-dim 16 --out {D}/out", 3,
       {"none of the 2 points can run here", "sdpa-cudnn: ", "sdpa-efficient: "}, {}, true},
       }},
      {"RingBaseline",  // --ring-baseline FILE: read and checked before any rank starts
       {
      {"RingBaselineMissing", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline {D}/nope.json"), 4,
       {"--ring-baseline '{D}/nope.json'", "No such file or directory"}},
      // 4 outranks the 3 of a run every scheme refuses (a paged cache).
      {"RingBaselineMissingAndRefused",
       profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --kv-layout paged --ring-baseline {D}/nope.json"), 4,
       {"--ring-baseline '{D}/nope.json'", "No such file or directory"}},
      {"RingBaselineDirectory", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline {D}/dir"), 4,
       {"--ring-baseline '{D}/dir'", "it is a directory"}, {{"dir/.keep", [] { return std::string(); }}}},
      {"RingBaselineFifo", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline {D}/in.fifo"), 4,
       {"--ring-baseline '{D}/in.fifo'", "it is a FIFO"}, {fifo("in.fifo")}},
      {"RingBaselineGarbage", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline {D}/garbage.bin"), 4,
       {"--ring-baseline '{D}/garbage.bin'", "not valid JSON"},
       {{"garbage.bin", [] { return std::string("\x7f" "ELF\x02\xff\xfe\x80\x81", 9); }}}, false,
       {"json.exception"}},
      {"RingBaselineOfAnotherProblem", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline {D}/good.summary.json"), 4,
       {"--ring-baseline '{D}/good.summary.json'", "another problem (1x2x33x32 bf16 causal)", "1x2x64x32"}, {good()}},
      {"RingBaselineIsAnOutput", profile("--variant ring-sdpa-flash --nproc 2 --seq 64 --ring-baseline "
                                         "{D}/out/ring-sdpa-flash/1_2_64_32_bf16_causal.rank1.summary.json"), 2,
       {"is one of this run's own outputs"}},
      {"RendezvousTimeoutZero", profile("--rendezvous-timeout 0"), 2, {"--rendezvous-timeout", "positive number, got 0"}},
      {"RendezvousTimeoutNotANumber", profile("--rendezvous-timeout soon"), 2, {"--rendezvous-timeout", "soon"}},
      {"RendezvousTimeoutPastAWeek", profile("--rendezvous-timeout 1e9"), 2, {"--rendezvous-timeout", "too long"}},
       }},
      {"Compare",  // compare: missing, malformed, truncated, wrongly typed, hostile inputs
       {
      {"CompareMissingFile", compare("missing.summary.json", "good.summary.json"), 4, {"missing.summary.json"},
       {good()}},
      {"CompareEmptyFile", compare("empty.json", "good.summary.json"), 4, {"empty.json", "not valid JSON"},
       {good(), {"empty.json", [] { return std::string(); }}}},
      {"CompareMalformed", compare("good.summary.json", "bad.json"), 4, {"bad.json", "not valid JSON"},
       {good(), {"bad.json", [] { return std::string("{\"schema_version\": 1,, }"); }}}},
      {"CompareTruncated", compare("good.summary.json", "cut.json"), 4, {"cut.json"},
       {good(), {"cut.json", [] { return good_summary_text().substr(0, good_summary_text().size() / 2); }}}},
      {"CompareBinaryGarbage", compare("good.summary.json", "garbage.bin"), 4, {"garbage.bin"},
       {good(), {"garbage.bin", [] { return std::string("\x7f" "ELF\x02\x01\x01\0\0\0\xff\xfe", 12); }}}},
      {"CompareTopLevelArray", compare("good.summary.json", "array.json"), 4, {"array.json", "top level"},
       {good(), {"array.json", [] { return std::string("[1, 2, 3]"); }}}},
      {"CompareSchemaVersionAsString", compare("good.summary.json", "typed.json"), 4, {"typed.json", "schema_version"},
       {good(), {"typed.json", [] { return good_with([](json& j) { j["schema_version"] = "1"; }); }}}},
      {"CompareNewerSchema", compare("good.summary.json", "newer.json"), 4, {"newer.json", "schema_version"},
       {good(), {"newer.json", [] { return good_with([](json& j) { j["schema_version"] = 99; }); }}}},
      {"CompareStatusUnknown", compare("good.summary.json", "status.json"), 4, {"status.json", "status"},
       {good(), {"status.json", [] { return good_with([](json& j) { j["status"] = "weird"; }); }}}},
      {"CompareProblemMissing", compare("good.summary.json", "noproblem.json"), 4, {"noproblem.json", "problem"},
       {good(), {"noproblem.json", [] { return good_with([](json& j) { j.erase("problem"); }); }}}},
      {"CompareSeqNegative", compare("good.summary.json", "negseq.json"), 4, {"negseq.json", "problem.seq_kv"},
       {good(), {"negseq.json", [] { return good_with([](json& j) { j["problem"]["seq_kv"] = -5; }); }}}},
      {"CompareOpsNotAnArray", compare("good.summary.json", "ops.json"), 4, {"ops.json", "ops"},
       {good(), {"ops.json", [] { return good_with([](json& j) { j["ops"] = "none"; }); }}}},
      {"CompareNumberOverflow", compare("good.summary.json", "big.json"), 4, {"big.json", "number overflow"},
       {good(), {"big.json", [] { return std::string("{\"schema_version\": 1e999}"); }}}},
      {"CompareTruncatedGzip", compare("good.summary.json", "cut.json.gz"), 4, {"cut.json.gz"},
       {good(), {"cut.json.gz", [] {
          const std::string gz = io::gzip_compress(good_summary_text());
          return gz.substr(0, gz.size() / 2);
        }}}},
      {"CompareDeeplyNested", compare("good.summary.json", "deep.json"), 4, {"deep.json", "nested"},
       {good(), {"deep.json", [] { return std::string(100000, '[') + std::string(100000, ']'); }}}},
      {"CompareHugeFile", compare("good.summary.json", "huge.json"), 4, {"huge.json", "MiB"},
       {good(), {"huge.json", [] { return std::string(size_t(17) << 20, ' '); }}}},
      {"CompareFileWithDirectory", "compare {D}/good.summary.json {D}", 2, {"{D}", "directory"}, {good()}},
      {"CompareEmptyDirectories", "compare {D}/a {D}/b", 4, {"no summaries"},
       {{"a/.keep", [] { return std::string(); }}, {"b/.keep", [] { return std::string(); }}}},
      {"CompareOneArgument", "compare {D}/good.summary.json", 2, {"B is required", "attnprof compare --help"},
       {good()}},
      // A profiling option after 'compare' is named, not taken as A ("B is required").
      {"CompareUnknownOptionFirst", "compare --kv-layout paged", 2,
       {"'attnprof compare' takes no --kv-layout", "compare --help"}, {}},
      {"CompareCsvUnderDevFull", compare("good.summary.json", "good.summary.json", "--csv /dev/full/diff.csv"), 4,
       {"/dev/full/diff.csv"}, {good()}},
      // An output naming one of compare's inputs, or two outputs naming one path.
      {"CompareOutIsTheInputDirectory", "compare {D}/a {D}/b --out {D}/a", 2,
       {"--out '{D}/a'", "output directory of a compared run"},
       {{"a/naive/1_2_33_32_bf16_causal.summary.json", [] { return good_summary_text(); }},
        {"b/naive/1_2_33_32_bf16_causal.summary.json", [] { return good_summary_text(); }}}},
      {"CompareOutIsASummarysRunDirectory", compare("a/naive/1_2_33_32_bf16_causal.summary.json",
                                                    "good.summary.json", "--out {D}/a"), 2,
       {"--out '{D}/a'", "output directory of a compared run"},
       {good(), {"a/naive/1_2_33_32_bf16_causal.summary.json", [] { return good_summary_text(); }}}},
      {"CompareCsvIsAnInput", compare("good.summary.json", "b.summary.json", "--csv {D}/b.summary.json"), 2,
       {"--csv '{D}/b.summary.json' names an input"}, {good(), good("b.summary.json")}},
      {"CompareMdIsAnInputThroughALink", compare("good.summary.json", "good.summary.json", "--md {D}/link.md"), 2,
       {"--md '{D}/link.md' names an input"}, {good(), {"link.md", nullptr, "good.summary.json"}}},
      {"CompareCsvAndMdOneFile", compare("good.summary.json", "good.summary.json", "--csv {D}/d.csv --md {D}/./d.csv"), 2,
       {"--csv and --md name one file"}, {good()}},
      {"CompareMarkdownUnderAFile",
       compare("good.summary.json", "good.summary.json", "--md {D}/good.summary.json/diff.md"), 4,
       {"{D}/good.summary.json/diff.md"}, {good()}},
       }},
  };
  return all;
}

void PrintTo(const Group& g, std::ostream* os) { *os << g.name << " (" << g.cases.size() << " cases)"; }

void make_fixture(const std::string& d, const Fixture& f) {
  const std::string path = d + "/" + f.name;
  const size_t slash = f.name.rfind('/');
  if (slash != std::string::npos) io::ensure_writable_dir(d + "/" + f.name.substr(0, slash));
  if (!f.link_to.empty()) {
    ASSERT_EQ(::symlink(f.link_to.c_str(), path.c_str()), 0) << path;
    return;
  }
  if (!f.bytes) {
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
    return;
  }
  const std::string bytes = f.bytes();
  const std::string suffix = "good.summary.json";
  if (f.name.size() >= suffix.size() && f.name.compare(f.name.size() - suffix.size(), suffix.size(), suffix) == 0)
    ASSERT_FALSE(bytes.empty()) << "the run that makes a summary failed";
  io::write_file_atomic(path, bytes);
}

void run_case(const Case& c) {
  if (c.needs_no_gpu && attnprof::cuda_available()) return;  // a CUDA device is present
  const std::string d = make_temp_dir("errors");
  ASSERT_FALSE(d.empty());
  for (const Fixture& f : c.files) make_fixture(d, f);
  const std::vector<std::string> before_list = list_tree(d);
  const std::set<std::string> before(before_list.begin(), before_list.end());

  const Result r = run_cli(replace_all(c.args, "{D}", d));

  EXPECT_EQ(r.rc, c.rc) << "stderr: " << r.err;
  std::vector<std::string> lines = split_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << "stderr must be one line:\n" << r.err;
  EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << r.err;
  EXPECT_EQ(lines[0].rfind("attnprof: ", 0), 0u) << lines[0];
  for (const std::string& needle : c.needles) {
    const std::string n = replace_all(needle, "{D}", d);
    EXPECT_NE(lines[0].find(n), std::string::npos) << "'" << n << "' not in: " << lines[0];
  }
  for (const std::string& f : c.forbidden) EXPECT_EQ(lines[0].find(f), std::string::npos) << f << " in: " << lines[0];
  // Nothing written: no output, no partial file, no temp file, no directory
  // (the run removes those it made), no lock file.
  for (const std::string& p : list_tree(d)) EXPECT_TRUE(before.count(p)) << "left behind: " << p;
  remove_tree(d);
}

class BadInput : public ::testing::TestWithParam<Group> {};

TEST_P(BadInput, ExitCodeOneLineNothingLeft) {
  for (const Case& c : GetParam().cases) {
    SCOPED_TRACE(std::string(c.name) + ": attnprof " + c.args);
    run_case(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Cli, BadInput, ::testing::ValuesIn(groups()),
                         [](const ::testing::TestParamInfo<Group>& info) { return std::string(info.param.name); });

TEST(BadInputTable, HasAtLeastEightyDistinctCases) {
  std::set<std::string> names, args;
  size_t n = 0;
  for (const Group& g : groups())
    for (const Case& c : g.cases) names.insert(c.name), args.insert(c.args), ++n;
  EXPECT_EQ(names.size(), n);
  EXPECT_GE(args.size(), 80u);
}

}  // namespace
