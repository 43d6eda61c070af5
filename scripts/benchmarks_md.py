#!/usr/bin/env python3
"""BENCHMARKS.md, made from the measurement records in docs/bench/*.json.

  python3 scripts/benchmarks_md.py                 # rewrite BENCHMARKS.md from docs/bench/
  python3 scripts/benchmarks_md.py --check         # exit 1 (with a diff) if BENCHMARKS.md is not that page
  python3 scripts/benchmarks_md.py --records DIR --output FILE

One table per suite (scripts/bench_records.py defines the records). A table
shows the figures of every point it selects, each with the commit and date of
the run that measured it and a reference to that run's command; a figure a
run did not record shows as "—". Deterministic: the page depends on the
records alone. Exit 2 (one line on stderr) when a record file is malformed.
"""
import argparse
import difflib
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_records  # noqa: E402

VARIANT_ORDER = ["naive", "inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "sdpa-auto",
                 "custom-softmax", "custom-flash", "custom-flash-sm90", "sdpa-auto fp8", "custom-flash-sm90 fp8", "sm90",
                 "portable", "cudnn", "flash"]
MASK_ORDER = ["causal", "full", "causal paged 16", "causal paged 64", "causal paged 256"]
PASS_ORDER = ["fwd", "bwd", "fwd+bwd"]
NONE = "—"

# The command that refreshes the records on the H200 (stages as the call's time allows; How measured).
REFRESH = ('ATTNPROF_COMMIT=<commit> RECORD=1 STAGES="build test run bench crosscheck pyops nvtx signals" '
           'bash scripts/gpu_check.sh')


def order(seq, value):
    return (seq.index(value), "") if value in seq else (len(seq), str(value))


def shape_key(label):
    """Problems by size: keys, then queries, heads, batch, head_dim (8x32/8x1/8192x128 = b x hq/hkv x sq/skv x d)."""
    m = re.fullmatch(r"(\d+)x(\d+)(?:/(\d+))?x(\d+)(?:/(\d+))?x(\d+)", str(label))
    if not m:
        return (1, str(label))
    b, hq, _, sq, skv, d = (int(x) if x else None for x in m.groups())
    return (0, skv or sq, sq, hq, b, d)


def fmt(value, spec=""):
    if value is None:
        return NONE
    if spec == "x":
        return f"{value:.2f}×"
    if spec == "us":
        return f"{value:.1f}"
    if spec == "g3":  # attnprof's at-a-glance TFLOP/s: three significant digits
        return f"{value:.3g}" if value < 1000 else f"{value:.0f}"
    if spec:
        return format(value, spec)
    return str(value).replace("|", "\\|")


class Col:
    """A table column: its header, how a point's cell is made, and whether it holds numbers (right-aligned)."""

    def __init__(self, head, make, number=False):
        self.head, self.make, self.number = head, make, number


def text(head, field):
    return Col(head, lambda p: fmt(p.get(field)))


def num(head, field, spec, skipped=False):
    """A figure; with skipped=True a point the run could not measure says so here."""
    return Col(head, lambda p: "skipped" if skipped and "skipped" in p else fmt(p.get(field), spec), True)


class Section:
    """One table: the points of `suite` that `select` keeps, one row each, sorted by `sort`, then the runs
    they come from (command, machine, note), numbered as the rows' last column names them."""

    def __init__(self, suite, title, intro, columns, select=lambda p: True, sort=None, drop_empty=False):
        self.suite, self.title, self.intro, self.columns = suite, title, intro, columns
        self.select, self.sort, self.drop_empty = select, sort, drop_empty

    def render(self, doc):
        # drop_empty: a point with no figure in any number column (a configuration by name that does not run
        # the shape's head dim) says nothing.
        figures = [c for c in self.columns if c.number] if self.drop_empty else []
        rows = [(p, run) for run in doc["runs"] for p in run["points"]
                if self.select(p) and (not figures or any(c.make(p) != NONE for c in figures))]
        if self.sort:
            rows.sort(key=lambda pr: self.sort(pr[0]))
        if not rows:
            return []
        labels = {}
        for _, run in rows:
            labels.setdefault(id(run), (len(labels) + 1, run))
        cols = self.columns + [Col("commit", None), Col("date", None), Col("run", None, True)]
        out = [f"## {self.title}", "", self.intro, "", "| " + " | ".join(c.head for c in cols) + " |",
               "|" + "|".join("---:" if c.number else "---" for c in cols) + "|"]
        for p, run in rows:
            cells = [c.make(p) for c in self.columns] + [f"`{run['commit']}`", run["date"], str(labels[id(run)][0])]
            out.append("| " + " | ".join(cells) + " |")
        return out + [""] + [run_line(n, run) for n, run in labels.values()] + [""]


def linked(text):
    """docs/… and README.md paths in a note or result as Markdown links (the page sits in the repository root)."""
    return re.sub(r"(?<![\w/\[(])((?:docs/[\w./-]*\w)|README\.md)(?![\w\]])",
                  lambda m: m.group(1) if "*" in m.group(1) else f"[{m.group(1)}]({m.group(1)})", text)


def run_line(n, run):
    env = ", ".join(x for x in (run["gpu"], run.get("driver") and f"driver {run['driver']}",
                                run.get("torch") and f"torch {run['torch']}", run.get("cuda") and f"CUDA {run['cuda']}")
                    if x)
    extra = f"; copy ceiling {run['copy_ceiling_gbs']:.0f} GB/s" if "copy_ceiling_gbs" in run else ""
    note = " " + linked(run["note"].rstrip(".")) + "." if run.get("note") else ""
    return f"{n}. `{run['command']}` at `{run['commit']}`, {run['date']} ({env}{extra}).{note}"


def by(*fields):
    orders = {"mask": MASK_ORDER, "pass": PASS_ORDER, "variant": VARIANT_ORDER, "group": GROUP_ORDER}

    def key(p):
        return tuple(shape_key(p.get(f)) if f == "shape" else order(orders[f], p.get(f)) if f in orders
                     else (0, p.get(f, bench_records.KEY_DEFAULTS.get(f, ""))) for f in fields)
    return key


def among(variants):
    return lambda p: p.get("variant") in variants


GROUP_ORDER = ["fused", "unfused", "decode", "prefill", "backward"]
RATIO = "`vs`: the baseline's event median over the variant's, both from the same run, as is the baseline's figure."
SECTIONS = [
    Section("forward", "Forward",
            "`scripts/bench_kernels.py --suite forward`, bf16: the fused kernels against cuDNN's, and our softmax "
            "between two cuBLAS GEMMs against the textbook formula with an in-place mask. " + RATIO,
            [text("shape", "shape"), text("mask", "mask"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("profiled µs", "profiled_us", "us"),
             num("TFLOP/s", "tflops", ".0f"), num("vs", "vs", "x"), text("baseline", "baseline"),
             num("its TFLOP/s", "baseline_tflops", ".0f"), num("its profiled µs", "baseline_profiled_us", "us")],
            among({"sdpa-flash", "custom-flash", "custom-flash-sm90", "custom-softmax"}),
            by("group", "shape", "mask", "variant")),
    Section("shapes", "Decode and prefill",
            "`scripts/bench_kernels.py --suite shapes`, bf16, 32 query and 8 K/V heads: one query per head against "
            "a K/V cache (GB/s: K and V read over the event median, against a device-to-device copy timed in the same "
            "run; and 4 queries against 131072 keys), 512 queries against 8192 or 32768 keys, 4096 against 4096. "
            "custom-flash-sm90's decode rows from before `808244a` ran its Hopper kernel; since then its operator runs "
            "custom-flash's split-KV kernel for these shapes. " + RATIO,
            [text("shape", "shape"), text("mask", "mask"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("TFLOP/s", "tflops", ".0f"),
             num("GB/s", "gbs", ".0f"), num("% of copy", "pct_copy", ".0f"), num("vs", "vs", "x"),
             text("baseline", "baseline"), num("its µs", "baseline_median_us", "us")],
            among({"sdpa-cudnn", "custom-flash", "custom-flash-sm90"}), by("group", "shape", "mask", "variant")),
    Section("backward", "Backward",
            "`scripts/bench_kernels.py --suite backward`, bf16: `bwd` times the backward alone, `fwd+bwd` both. "
            "custom-flash and custom-flash-sm90 run the same backward kernels, so the table shows "
            "custom-flash-sm90's (the faster forward) only. " + RATIO,
            [text("shape", "shape"), text("mask", "mask"), text("pass", "pass"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("profiled µs", "profiled_us", "us"),
             num("TFLOP/s", "tflops", ".0f"), num("vs", "vs", "x"), text("baseline", "baseline"),
             num("its TFLOP/s", "baseline_tflops", ".0f")],
            among({"sdpa-cudnn", "custom-flash-sm90"}),
            by("shape", "mask", "pass", "variant")),
    Section("serving", "Sliding window",
            "`scripts/bench_kernels.py --suite serving`, bf16, causal, a 4096-key window (`--window 4096`) against "
            "no window, each variant in the same run (custom-flash-sm90 has no window). share: the windowed event "
            "median over the causal one; ideal: the pairs inside the window over the causal ones (the share of a "
            "kernel that skips everything outside the window); wall: the whole windowed `attnprof` command.",
            [text("shape", "shape"), text("variant", "variant"), num("window µs", "median_us", "us", True),
             num("causal µs", "causal_median_us", "us"), num("TFLOP/s", "tflops", ".0f"),
             num("share of causal", "window_share", ".3f"), num("ideal", "ideal_share", ".3f"),
             num("wall s", "wall_s", ".1f")],
            lambda p: str(p.get("mask", "")).startswith("window") and p.get("variant") != "custom-flash-sm90",
            by("shape", "variant")),
    Section("serving", "Paged KV cache",
            "`scripts/bench_kernels.py --suite serving`, bf16, causal decode from a KV cache in pages scattered "
            "through a random block table (`--kv-layout paged --page-size N`): custom-flash reads the pages in its "
            "kernels, the others gather them into contiguous K/V inside the measured scope first. vs contiguous: "
            "the variant's contiguous decode over its paged one; vs gather: sdpa-flash's paged time (gather, then "
            "SDPA) over the variant's; GB/s: K and V bytes over the event median; all from one run. Every other "
            "variant gathers as sdpa-flash does: sdpa-cudnn measured within 1% of it, custom-flash-sm90 14% slower "
            "(measured before its decode shapes ran the split-KV kernel, `808244a`).",
            [text("shape", "shape"), text("layout", "mask"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("GB/s", "gbs", ".0f"),
             num("% of copy", "pct_copy", ".0f"), num("vs contiguous", "vs_contiguous", "x"),
             num("vs gather", "vs", "x"), num("wall s", "wall_s", ".1f")],
            # custom-flash, and sdpa-flash for every variant that gathers (the others' gathers cost the same).
            lambda p: p.get("group") == "paged" and p.get("variant") in {"custom-flash", "sdpa-flash"} and
            ("paged" in str(p.get("mask", "")) or p.get("variant") == "custom-flash"),
            by("shape", "mask", "variant")),
    Section("serving", "Variable-length prefill",
            "`scripts/bench_kernels.py --suite serving`, bf16, causal, 16 sequences of `--seqlens mix:16x128-8192` "
            "(seed 0), 32q/8kv heads x 128: custom-flash-sm90, custom-flash, sdpa-flash and sdpa-cudnn run the packed batch "
            "(`cu_seqlens`), sdpa-math and sdpa-cudnn again (`--varlen-layout padded`) the padded one under a mask. "
            "TFLOP/s count real tokens only (the useful rate); batch: the variant's layout and, padded, the share "
            "of the padded area it computes for nothing; profiled: its kernels' time in the trace. vs: "
            "sdpa-flash's varlen time over the variant's, same run.",
            [text("variant", "variant"), num("event median µs", "median_us", "us", True),
             num("profiled µs", "profiled_us", "us"),
             num("useful TFLOP/s", "tflops", ".0f"), num("vs", "vs", "x"), text("batch", "batch"),
             num("wall s", "wall_s", ".1f")],
            lambda p: p.get("group") == "varlen", by("variant")),
    Section("fp8", "FP8",
            "`scripts/bench_kernels.py --suite fp8`: `--dtype fp8` (q, k and v in e4m3, per-head scales, bf16 "
            "output) beside bf16. `sdpa-auto fp8` dequantises to bf16 inside the measured scope, then runs "
            "SDPA's choice; error: the output's relative Frobenius error against float64 of the same (for fp8, "
            "the dequantised) inputs; vs our bf16: custom-flash-sm90's bf16 time over the fp8 variant's (issue 32's "
            "target ratio). " + RATIO,
            [text("shape", "shape"), text("mask", "mask"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("TFLOP/s", "tflops", ".0f"), num("vs", "vs", "x"),
             num("vs our bf16", "vs_our_bf16", "x"), num("error vs fp64", "error_vs_fp64", ".2g")],
            lambda p: p.get("group") == "fp8", by("shape", "mask", "variant")),
    Section("fp8", "FP8 decode",
            "`scripts/bench_kernels.py --suite fp8`, the decode points (32 query and 8 K/V heads, causal): "
            "custom-flash-sm90 in fp8 (its decode route: the split-KV kernel reading K and V as e4m3) and in bf16 "
            "against sdpa-flash (bf16). GB/s: K and V bytes (one a value in e4m3, two in bf16) over the event median, "
            "against a device-to-device copy timed in the same run; vs our bf16 as above. " + RATIO,
            [text("shape", "shape"), text("mask", "mask"), text("variant", "variant"),
             num("event median µs", "median_us", "us", True), num("GB/s", "gbs", ".0f"),
             num("% of copy", "pct_copy", ".0f"), num("vs", "vs", "x"), num("vs our bf16", "vs_our_bf16", "x"),
             num("error vs fp64", "error_vs_fp64", ".2g")],
            lambda p: p.get("group") == "fp8_decode", by("shape", "mask", "variant")),
    Section("op_backward", "Backward kernels from Python",
            "`scripts/bench_flash_bwd.py`, bf16: the backward operators alone (sm90: the Hopper kernel; portable: "
            "the `mma.sync` one) and SDPA's backward in one process; the SDPA columns are from the same run.",
            [text("shape", "shape"), text("mask", "mask"), text("kernel", "variant"), num("µs", "us", ".0f"),
             num("TFLOP/s", "tflops", ".0f"), num("sdpa-flash µs", "sdpa_flash_us", ".0f"),
             num("sdpa-cudnn µs", "sdpa_cudnn_us", ".0f"), num("vs sdpa-flash", "vs_sdpa_flash", "x"),
             num("vs sdpa-cudnn", "vs_sdpa_cudnn", "x")],
            among({"sm90", "portable"}), by("shape", "mask", "variant")),
    Section("op_forward", "Forward kernels from Python",
            "`scripts/bench_flash_sm90.py`, bf16: the operator and SDPA in one process, interleaved in a random "
            "order (with `--fp8`, `sm90 fp8` too: the e4m3 kernel on the same draws quantised per head). `vs`: "
            "cudnn's time over the kernel's, same run; vs sm90 bf16: the bf16 kernel's over the fp8 one's.",
            [text("shape", "shape"), text("mask", "mask"), text("backend", "variant"), num("µs", "us", "us"),
             num("TFLOP/s", "tflops", ".0f"), num("vs", "vs", "x"), num("vs sm90 bf16", "vs_sm90_bf16", "x")],
            sort=by("shape", "mask", "variant"), drop_empty=True),
    Section("op_forward_sustained", "Forward at the power cap",
            "`scripts/bench_flash_sm90.py --sustain`, bf16: each kernel alone for seconds of back-to-back calls, "
            "timed over the second half, once the clock has settled under the 700 W cap. `vs`: cudnn's time over "
            "the kernel's, same run.",
            [text("shape", "shape"), text("mask", "mask"), text("backend", "variant"), num("µs", "us", "us"),
             num("SM clock MHz", "clock_mhz", ".0f"), num("power W", "power_w", ".0f"), num("vs", "vs", "x")],
            sort=by("shape", "mask", "variant")),
    Section("variants", "Every variant",
            "`attnprof --variant all` (its at-a-glance table), bf16 unless the problem names its dtype: kernels, profiled and event-median GPU time per "
            "step, TFLOP/s from the profiled time, speed-up over naive in the same run (sdpa-auto, the backend it "
            "picks, left out; decode, seq_q < seq_kv, in Decode and prefill above).",
            [Col("problem", lambda p: f"{p['shape']} {p['mask']} {p['pass']}" +
                 ("" if p.get("dtype", "bf16") == "bf16" else f" {p['dtype']}")), text("variant", "variant"),
             Col("kernels", lambda p: fmt(p.get("kernels"), "g") if p.get("status") == "ok" else
                 fmt(p.get("status")), True),
             num("profiled µs", "profiled_us", "us"), num("event median µs", "median_us", "us"),
             num("TFLOP/s", "tflops", "g3"), num("vs naive", "vs", "x")],
            lambda p: p.get("variant") != "sdpa-auto" and "/" not in p.get("shape", "").split("x")[-2],
            sort=by("pass", "shape", "mask", "dtype", "variant")),
    Section("ring", "Context parallel: ring and Ulysses",
            "`scripts/bench_ring.py`: `--variant <scheme>-<inner> --nproc N`, batch 1, 16 heads, head_dim 128, bf16; the "
            "slower rank's unprofiled time per forward against the inner kernel on one GPU; efficiency = 1-GPU time "
            "/ (N × ring time); overlap and exposed communication from each rank's trace, the worse rank's.",
            [num("seq", "seq", ""), text("mask", "mask"), Col("scheme", lambda p: p.get("scheme", "ring")),
             text("inner", "inner"), num("GPUs", "nproc", ""),
             num("1 GPU ms", "one_gpu_ms", ".2f"), num("ring ms", "ring_ms", ".2f"), num("speed-up", "speedup", "x"),
             num("efficiency", "efficiency", ".3f"), num("overlap %", "overlap_pct", ".1f"),
             num("exposed %", "exposed_pct", ".2f")],
            sort=by("mask", "seq", "inner")),
]


def crosscheck_section(doc):
    """Per run and variant: the cases, how many passed, and the scope GPU time furthest from torch.profiler's."""
    groups = {}
    for run in doc["runs"]:
        for p in run["points"]:
            groups.setdefault((id(run), p["variant"]), (run, []))[1].append(p)
    rows = sorted(groups.values(), key=lambda rp: (order(VARIANT_ORDER, rp[1][0]["variant"]), rp[0]["date"],
                                                    rp[0]["commit"], rp[0]["command"]))
    labels = {}
    out = ["## Against Python's torch.profiler", "",
           "`scripts/crosscheck.py`: the same workload through attnprof and through `torch.profiler`; a case passes "
           "when kernels per call and their names, op names and call counts agree, and each scope's GPU time and "
           "Self CUDA per op are within 5%.", "",
           "| variant | passes | shapes | passed | GPU time, attnprof vs torch.profiler, furthest | commit | date | run |",
           "|---|---|---|---:|---|---|---|---:|"]
    for run, pts in rows:
        n = labels.setdefault(id(run), (len(labels) + 1, run))[0]
        cases = {(p["shape"], p["mask"], p["pass"]): p["result"] for p in pts}
        passed = sum(r == "pass" for r in cases.values())
        timed = [p for p in pts if "deviation_pct" in p]
        worst = NONE
        if timed:
            w = max(timed, key=lambda p: (abs(p["deviation_pct"]), p["shape"], p["pass"], p["scope"]))
            worst = (f"{w['deviation_pct']:+.1f}% ({w['attnprof_us']:.1f} vs {w['python_us']:.1f} µs, {w['shape']} "
                     f"{w['pass']} {w['scope']})")
        passes = ", ".join(sorted({p["pass"] for p in pts}, key=lambda x: order(PASS_ORDER, x)))
        shapes = ", ".join(sorted({p["shape"] for p in pts}, key=shape_key))
        out.append(f"| {pts[0]['variant']} | {passes} | {shapes} | {passed} of {len(cases)} | {worst} | "
                   f"`{run['commit']}` | {run['date']} | {n} |")
    out.append("")
    out += [run_line(n, run) for n, run in labels.values()]
    return out + [""]


def checks_section(doc):
    out = ["## Checks on the GPU machine", "",
           "Tests and one-off checks that need the GPU (CI has none): the latest result of each.", "",
           "| check | result | command | GPU | commit | date |", "|---|---|---|---|---|---|"]
    for run in doc["runs"]:
        for p in run["points"]:
            note = f" ({run['note']})" if run.get("note") else ""
            out.append(f"| {fmt(p['check'])} | {linked(fmt(p['result']) + note)} | `{run['command']}` | {run['gpu']} | "
                       f"`{run['commit']}` | {run['date']} |")
    return out + [""]


HEADER = """# Benchmarks

What attnprof's variants measure on the GPU today, and the checks that need one. Made by
`scripts/benchmarks_md.py` from the records in [docs/bench/](docs/bench/) (one JSON file per suite): change or
re-measure those, not this page; the `benchmarks_md` test fails when the two differ. Each row names the commit
and date it was measured at and its run (listed below the table: command, machine). Earlier figures are in git
history, releases in [CHANGELOG.md](CHANGELOG.md), the kernels' design and its measured reasons in
[docs/notes/](docs/notes/).

## How measured

- **attnprof's figures** (`bench_kernels.py`, `--variant all`): one attnprof process per point. *Event median*:
  the unprofiled CUDA-event median of back-to-back steps (input sets rotated when they fit in L2); *profiled*:
  the kernels' own time in the trace per step. TFLOP/s: attnprof's FLOP count (4·B·Hq·Sq·Skv·D, the visible part
  under a causal mask, 2.5× for a backward) over the event median. `--repeat N`: every point N times, the
  variants in alternating order, medians. A ratio divides figures of one run only; "—" is a figure the run did
  not record.
- **Op level** (`bench_flash_sm90.py`, `bench_flash_bwd.py`): the operators called from Python, all backends in
  one process in a random order per repetition, untimed calls before each; medians of repetitions of
  back-to-back calls between CUDA events.
- **The clock.** Under sustained load the H200 runs at its 700 W power cap and its clock falls within a 100-step
  loop, so event medians of short runs differ by up to ±4% between processes; profiled times much less.
- **Refreshing.** On the H200, in the repository root, `{refresh}`
  (`ring` on two GPUs; `PREBUILT=DIR` takes a build tree made here) records each stage's results in its
  `$OUT/results_<stages>.tgz`; here, `python3 scripts/bench_records.py merge results_<stages>.tgz` adds them to
  `docs/bench/` (a point replaces the same point of an older run) and `python3 scripts/benchmarks_md.py`
  rewrites this page. Each bench script records by itself with `--record docs/bench`.
"""


def render(docs):
    lines = HEADER.replace("{refresh}", REFRESH).splitlines()
    body = []
    for s in SECTIONS:
        if s.suite in docs:
            body += s.render(docs[s.suite])
    if "crosscheck" in docs:
        body += crosscheck_section(docs["crosscheck"])
    if "checks" in docs:
        body += checks_section(docs["checks"])
    lines += [""] + body
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = bench_records.REPO
    ap.add_argument("--records", default=os.path.join(root, "docs", "bench"))
    ap.add_argument("--output", default=os.path.join(root, "BENCHMARKS.md"))
    ap.add_argument("--check", action="store_true",
                    help="make the page in a temp file and exit 1 if --output differs from it (nothing written)")
    args = ap.parse_args()
    try:
        page = render(bench_records.load_dir(args.records))
    except (bench_records.RecordError, OSError) as e:
        print(f"benchmarks_md: {e}", file=sys.stderr)
        return 2
    if args.check:
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as tmp:
            tmp.write(page)
        try:
            with open(args.output, encoding="utf-8") as fh:
                current = fh.read()
        except OSError as e:
            print(f"benchmarks_md: cannot read {args.output}: {e.strerror}", file=sys.stderr)
            return 2
        finally:
            os.unlink(tmp.name)
        if current == page:
            print(f"{args.output} is what docs/bench makes ({page.count(chr(10))} lines)")
            return 0
        diff = list(difflib.unified_diff(current.splitlines(), page.splitlines(), args.output, "regenerated",
                                         lineterm="", n=1))
        print("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""))
        print(f"benchmarks_md: {args.output} differs from what {args.records} makes; "
              "run python3 scripts/benchmarks_md.py and commit the page with its records", file=sys.stderr)
        return 1
    tmp = f"{args.output}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, args.output)
    print(f"{args.output}: {page.count(chr(10))} lines from {args.records}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
