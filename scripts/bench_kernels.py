#!/usr/bin/env python3
"""Time attention variants through attnprof itself, suite by suite.

Each point runs `attnprof --variant V ... --timing-iters N` and reads its
summary: the unprofiled CUDA-event median of back-to-back steps (input sets
rotated when they fit in L2), the profiled GPU time, and the wall time of the
whole command. TFLOP/s use attnprof's own FLOP count (4*B*Hq*pairs*D, causal
counting the visible part; the backward 2.5x the forward). Prints one Markdown
table per suite, ratios against the named baseline of the same run.

Suites:
  forward   custom-flash, custom-flash-sm90 and every SDPA backend at
            8x16x1024x64, 4x16x4096x128, 4x16x8192x128, 1x16x16384x128,
            causal and full (issue 14's shapes; ratio to sdpa-cudnn);
            custom-softmax vs inplace at 4x16x4096x128.
  shapes    decode (8 x 32q/8kv x 1 x {4096, 32768, 131072} x 128), chunked
            prefill (1 x 32/8, 512 queries x {8192, 32768} keys), GQA prefill
            (4 x 32/8 x 4096 x 128): time, K+V bandwidth against a
            device-to-device copy measured in the same run (issue 12).
  backward  bwd and fwd+bwd of every variant at 8x16x1024x64 and
            4x16x4096x128, causal and full; the fused ones also at
            1x16x16384x128 (issue 13; ratio to sdpa-flash).
  serving   a sliding window of 4096 keys (--window) at 1x16x32768x128 and
            1 x 32q/8kv x 16384 x 128 against the causal run of the same
            variant: the window's share of the causal time beside the ideal
            share (its visible pairs over the causal ones); decode from a
            paged KV cache (8 x 32q/8kv x 1 x 32768 x 128, pages of 16, 64,
            256 tokens) against the contiguous decode and against
            gather-then-SDPA; a variable-length prefill (16 sequences of
            --seqlens mix:16x128-8192, 32q/8kv x 128, causal): custom-flash,
            sdpa-flash and sdpa-cudnn on the packed batch, sdpa-math and
            sdpa-cudnn again (--varlen-layout padded) on the padded one, useful
            TFLOP/s (real tokens only) and each padded variant's wasted share
            (issue 31).
  fp8       --dtype fp8 at 4x16x4096x128, 1x16x16384x128, 4x16x8192x128 and
            8x16x1024x64, causal and full: custom-flash-sm90 in fp8 (its e4m3
            kernel; skipped with the reason where it cannot run, e.g. head_dim
            64) and sdpa-auto's dequantising path, beside custom-flash-sm90 and
            sdpa-cudnn in bf16 (the ratio's baseline; each fp8 point also
            against our bf16 kernel: vs_our_bf16); each with its error against
            float64 (the summary's headline.accuracy) (issue 32); and decode
            (the shapes suite's four causal points): custom-flash-sm90 in fp8
            and in bf16 against sdpa-flash, K+V bandwidth in each one's bytes.

  python3 scripts/bench_kernels.py [--attnprof build/attnprof] [--suite forward,shapes,backward]
                                   [--iters 100] [--markdown out.md] [--json out.json]
                                   [--variants custom-flash,custom-flash-sm90] [--repeat 1]
                                   [--shapes 4x16x4096x128,...] [--masks causal|full]
                                   [--record docs/bench [--commit SHA]]

--record DIR adds the run to DIR/<suite>.json for each suite run (the records
BENCHMARKS.md is made from: scripts/bench_records.py, scripts/benchmarks_md.py);
its points replace the same points of older runs there.

--variants times only those variants (plus each suite's baseline, which the
ratios need): a shorter run after a change to some of them.

--shapes and --masks keep only the points of those shapes (as the tables
name them, e.g. 4x16x4096x128 or 8x32/8x1/4096x128) and masks: many
repeats of one point, e.g. --repeat 10 --shapes 4x16x4096x128 --masks full.

--repeat N runs the variants of each point N times, in alternating order
(as listed, then reversed, ...), and reports the median of their event
medians and of their profiled times, with the spread of the event medians
among the facts. Under sustained load the H200 lowers its clock, and a
variant timed right after a long run of another can lose several per cent:
one process per point measured custom-flash-sm90 at 4x16x4096x128 full at
813 us in one run and 883 us in the next, both times 811-812 us profiled
(2026-12-01). Alternating the order gives every variant both places.
"""
import statistics
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_records  # noqa: E402
from bench_records import shape_label  # noqa: E402

SDPA = ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient"]
FUSED = ["custom-flash", "custom-flash-sm90"] + SDPA
ALL = ["naive", "inplace", "sdpa-math"] + SDPA + ["sdpa-auto", "custom-softmax", "custom-flash", "custom-flash-sm90"]


def mask_label(causal, window=0, page=0, seqlens=None, padded=False):
    """'causal', 'full', 'window 4096', 'causal paged 16', 'causal varlen mix:16x128-8192' (+ ' padded' under
    --varlen-layout padded): a point's mask, and its KV layout when paged, its lengths when variable."""
    label = (f"window {window}" if window else "causal") if causal else "full"
    label = f"{label} paged {page}" if page else label
    return f"{label} varlen {seqlens}{' padded' if padded else ''}" if seqlens else label


def variant_and_dtype(spec):
    """'custom-flash-sm90' -> ('custom-flash-sm90', 'bf16'); 'sdpa-auto fp8' -> ('sdpa-auto', 'fp8'):
    a point's variant label names its dtype when it is not bf16."""
    name, _, dtype = spec.partition(" ")
    return name, dtype or "bf16"


def run_point(exe, out_root, variant, b, hq, hkv, sq, skv, d, causal, pass_="fwd", iters=100, window=0, page=0,
              seqlens=None, padded=False):
    """variant: a name, or 'name dtype' for another dtype than bf16 (variant_and_dtype);
    seqlens: a --seqlens value; it sets the batch and the lengths (b, sq and skv only label the point);
    padded: --varlen-layout padded."""
    label, (variant, dtype) = variant, variant_and_dtype(variant)
    out = tempfile.mkdtemp(prefix="pt_", dir=out_root)
    sizes = ["--seqlens", seqlens] if seqlens else ["--batch", str(b), "--seq-q", str(sq), "--seq-kv", str(skv)]
    cmd = [exe, "--variant", variant, "--heads", str(hq), "--kv-heads", str(hkv)] + sizes + \
          ["--head-dim", str(d), "--dtype", dtype, "--pass", pass_,
           "--timing-iters", str(iters), "--out", out, "--row-limit", "1",
           "--causal" if causal else "--no-causal"] + (["--window", str(window)] if window else []) + \
        (["--kv-layout", "paged", "--page-size", str(page)] if page else []) + \
        (["--varlen-layout", "padded"] if padded else [])
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    point = {"variant": label, "shape": shape_label(b, hq, hkv, sq, skv, d),
             "mask": mask_label(causal, window, page, seqlens, padded), "pass": pass_, "wall_s": wall}
    if p.returncode != 0:
        point["skipped"] = (p.stderr.strip().splitlines() or ["?"])[-1][:160]
        return point
    (path,) = glob.glob(os.path.join(out, variant, "*.summary.json"))
    with open(path) as fh:
        s = json.load(fh)
    ENVIRONMENT.update(s.get("environment", {}))
    h = s["headline"]
    point["median_us"] = h.get("gpu_time_median_us")
    point["profiled_us"] = sum(sc["cuda_time_avg_us"] for sc in h["scopes"])
    point["flops"] = s["problem"]["flops"]
    point["kernels"] = sum(sc["kernels_per_call"] for sc in h["scopes"])
    point["facts"] = s["facts"]
    if h.get("accuracy"):
        point["error_vs_fp64"] = h["accuracy"]["rel_error_vs_fp64"]
    if point["median_us"]:
        point["tflops"] = point["flops"] / (point["median_us"] * 1e-6) / 1e12
    return point


# The first summary's environment (device_name, torch_version, cuda_runtime): what --record names.
ENVIRONMENT = {}
# Set by --repeat.
REPEAT = 1
# Set by --shapes / --masks: the points to run (None: all).
SHAPES = None
MASKS = None


def run_variants(exe, out_root, variants, *args, iters=100, **kwargs):
    """run_point for each variant at one point, REPEAT times in alternating order; one combined point each.
    iters: a number, or a function of the variant. None of them where --shapes/--masks leave the point out."""
    b, hq, hkv, sq, skv, d, causal = args[:7]
    mask = "varlen" if kwargs.get("seqlens") else "paged" if kwargs.get("page") else \
        ("window" if kwargs.get("window") else "causal") if causal else "full"
    if (SHAPES is not None and shape_label(b, hq, hkv, sq, skv, d) not in SHAPES) or \
            (MASKS is not None and mask not in MASKS):
        return []
    runs = {v: [] for v in variants}
    for r in range(REPEAT):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            runs[v].append(run_point(exe, out_root, v, *args, iters=iters(v) if callable(iters) else iters, **kwargs))
    return [combine(runs[v]) for v in variants]


def combine(points):
    """One point from repeated runs of it: medians of the timed ones, total wall time, the event medians' spread."""
    timed = [p for p in points if p.get("median_us")]
    if len(points) == 1 or not timed:
        return points[0]
    p = dict(timed[0])
    p["median_us"] = statistics.median(q["median_us"] for q in timed)
    p["profiled_us"] = statistics.median(q["profiled_us"] for q in timed)
    p["tflops"] = p["flops"] / (p["median_us"] * 1e-6) / 1e12
    p["wall_s"] = sum(q["wall_s"] for q in points)
    p["runs_median_us"] = [q["median_us"] for q in timed]
    p["runs"] = len(timed)
    p["facts"] = {"runs": f"{len(timed)} of {len(points)}, event medians "
                          f"{min(p['runs_median_us']):.1f}-{max(p['runs_median_us']):.1f} us", **p["facts"]}
    return p


def copy_ceiling_gbs():
    """Device-to-device copy of 2 GiB, bytes read + written over time (median of 10)."""
    try:
        import torch
    except Exception:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.empty(1 << 30, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    times.sort()
    return 2 * x.numel() * x.element_size() / times[len(times) // 2] / 1e9


def fmt(v, spec):
    return format(v, spec) if v is not None else ""


def table(rows, head, cells):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def ratio_to(points, baseline):
    """vs: the baseline's event median over each point's, and the baseline's figures beside it (same run)."""
    base = {(p["shape"], p["mask"], p["pass"]): p for p in points if p["variant"] == baseline}
    for p in points:
        b = base.get((p["shape"], p["mask"], p["pass"]), {})
        p["vs"] = b["median_us"] / p["median_us"] if b.get("median_us") and p.get("median_us") else None
        p["baseline"] = baseline
        if p["variant"] != baseline:
            for f in ("median_us", "profiled_us", "tflops", "gbs"):
                if b.get(f) is not None:
                    p["baseline_" + f] = b[f]
    return points


# What a record keeps of a point (bench_records.py; facts and FLOPs stay in the printed tables).
RECORDED = ("group", "shape", "mask", "pass", "variant", "skipped", "median_us", "profiled_us", "tflops", "gbs",
            "pct_copy", "vs", "runs", "runs_median_us_range", "wall_s", "kernels", "baseline", "baseline_median_us",
            "baseline_profiled_us", "baseline_tflops", "baseline_gbs", "causal_median_us", "window_share",
            "ideal_share", "contiguous_median_us", "vs_contiguous", "batch", "error_vs_fp64", "vs_our_bf16")


def record_point(p, group):
    q = dict(p, group=group)
    if q.get("runs_median_us"):
        q["runs_median_us_range"] = [min(q["runs_median_us"]), max(q["runs_median_us"])]
    return {k: q[k] for k in RECORDED if q.get(k) is not None}


def cells(p):
    if "skipped" in p:
        return [p["shape"], p["mask"], p["pass"], p["variant"], "skipped", "", "", "", f"{p['wall_s']:.1f}", p["skipped"]]
    return [p["shape"], p["mask"], p["pass"], p["variant"], fmt(p["median_us"], ".1f"), fmt(p["profiled_us"], ".1f"),
            fmt(p.get("tflops"), ".0f"), fmt(p.get("vs"), ".2f"), f"{p['wall_s']:.1f}",
            "; ".join(([f"vs custom-flash-sm90 bf16: {p['vs_our_bf16']:.2f}x"] if "vs_our_bf16" in p else []) +
                      ([f"error vs fp64: {p['error_vs_fp64']:.3g}"] if "error_vs_fp64" in p else []) +
                      [f"{k}: {v}" for k, v in p["facts"].items()])[:120]]


# Set by --variants: the variants to time (each table's baseline always runs).
CHOSEN = None


def pick(variants, baseline):
    return [v for v in variants if CHOSEN is None or variant_and_dtype(v)[0] in CHOSEN or v == baseline]


HEAD = ["shape", "mask", "pass", "variant", "event median (µs)", "profiled (µs)", "TFLOP/s", "vs {base}",
        "wall (s)", "facts / reason"]


def forward_suite(exe, tmp, iters):
    pts = []
    for (b, h, s, d) in [(8, 16, 1024, 64), (4, 16, 4096, 128), (4, 16, 8192, 128), (1, 16, 16384, 128)]:
        for causal in (True, False):
            pts += run_variants(exe, tmp, pick(FUSED, "sdpa-cudnn"), b, h, h, s, s, d, causal, iters=iters)
    ratio_to(pts, "sdpa-cudnn")
    sm = run_variants(exe, tmp, pick(["inplace", "custom-softmax"], "inplace"), 4, 16, 16, 4096, 4096, 128, True,
                      iters=max(10, iters // 10))
    ratio_to(sm, "inplace")
    return [("fused", "forward: fused kernels (ratio to sdpa-cudnn)", pts, "sdpa-cudnn"),
            ("unfused", "forward: the unfused pipeline (ratio to inplace)", sm, "inplace")]


def decode_points(exe, tmp, variants, iters):
    """Causal decode, 32 query and 8 K/V heads x 128: 8 sequences of one query against 4K-128K keys, and one
    sequence of 4 queries (a speculative step) against 128K; gbs: K and V bytes (one a value for an fp8
    variant, two otherwise) over the event median."""
    decode = []
    for (b, hq, hkv, sq, skv) in bench_records.DECODE_SHAPES:
        for p in run_variants(exe, tmp, variants, b, hq, hkv, sq, skv, 128, True, iters=iters):
            if p.get("median_us"):
                kv_bytes = 2 * b * hkv * skv * 128 * (1 if p["variant"].endswith(" fp8") else 2)
                p["gbs"] = kv_bytes / (p["median_us"] * 1e-6) / 1e9
            decode.append(p)
    return decode


def share_of_copy(pts, ceiling):
    """pct_copy: each point's gbs against the copy ceiling of the same run (none without one)."""
    for p in pts:
        if p.get("gbs"):
            p["pct_copy"] = 100 * p["gbs"] / ceiling if ceiling else None


def shapes_suite(exe, tmp, iters):
    ceiling = copy_ceiling_gbs()
    decode = decode_points(exe, tmp, pick(["custom-flash", "custom-flash-sm90"] + SDPA + ["sdpa-math"], "sdpa-flash"),
                           iters)
    share_of_copy(decode, ceiling)
    ratio_to(decode, "sdpa-flash")
    prefill = []
    for (b, sq, skv) in [(1, 512, 8192), (1, 512, 32768), (4, 4096, 4096)]:
        for causal in ((True,) if sq != skv else (True, False)):
            prefill += run_variants(exe, tmp, pick(["custom-flash", "custom-flash-sm90"] + SDPA, "sdpa-flash"),
                                    b, 32, 8, sq, skv, 128, causal, iters=iters)
    ratio_to(prefill, "sdpa-flash")
    RUN_FIELDS["shapes"] = {"copy_ceiling_gbs": ceiling} if ceiling else {}
    return [("decode", f"decode: K+V bandwidth (copy ceiling {fmt(ceiling, '.0f')} GB/s in this run; ratio to sdpa-flash)",
             decode, "sdpa-flash"),
            ("prefill", "chunked and GQA prefill (ratio to sdpa-flash)", prefill, "sdpa-flash")]


def backward_suite(exe, tmp, iters):
    pts = []
    for (b, h, s, d), variants in [((8, 16, 1024, 64), ALL), ((4, 16, 4096, 128), ALL),
                                   ((1, 16, 16384, 128), FUSED)]:
        for causal in (True, False):
            for pass_ in ("bwd", "fwd+bwd"):
                slow = ("naive", "inplace", "sdpa-math", "custom-softmax") if s >= 4096 else ()
                pts += run_variants(exe, tmp, pick(variants, "sdpa-flash"), b, h, h, s, s, d, causal, pass_,
                                    iters=lambda v: max(10, iters // 10) if v in slow else iters)
    ratio_to(pts, "sdpa-flash")
    return [("backward", "backward (ratio to sdpa-flash)", pts, "sdpa-flash")]


WINDOW = 4096


def serving_suite(exe, tmp, iters):
    """Each variant windowed and causal at the same shape; a windowed point gets the causal median of its
    variant (causal_median_us), its share of it (window_share) and the ideal share: the windowed FLOPs (the
    pairs inside the window) over the causal ones, from the summaries."""
    pts = []
    variants = pick(["custom-flash", "custom-flash-sm90", "sdpa-flash", "sdpa-cudnn"], "sdpa-flash")
    for (b, hq, hkv, s, d) in [(1, 16, 16, 32768, 128), (1, 32, 8, 16384, 128)]:
        causal = run_variants(exe, tmp, variants, b, hq, hkv, s, s, d, True, iters=iters)
        windowed = run_variants(exe, tmp, variants, b, hq, hkv, s, s, d, True, iters=iters, window=WINDOW)
        by_variant = {p["variant"]: p for p in causal}
        for p in windowed:
            c = by_variant.get(p["variant"], {})
            if p.get("median_us") and c.get("median_us"):
                p["causal_median_us"] = c["median_us"]
                p["window_share"] = p["median_us"] / c["median_us"]
                p["ideal_share"] = p["flops"] / c["flops"]
                p["facts"] = {"share of causal": f"{p['window_share']:.3f} (ideal {p['ideal_share']:.3f}, "
                                                 f"{p['window_share'] / p['ideal_share']:.2f}x it)", **p["facts"]}
        pts += causal + windowed
    ratio_to(pts, "sdpa-flash")
    return [("window", f"sliding window {WINDOW} against causal (ratio to sdpa-flash)", pts, "sdpa-flash"),
            paged_decode(exe, tmp, iters), varlen_prefill(exe, tmp, iters)]


VARLEN = "mix:16x128-8192"


def varlen_prefill(exe, tmp, iters):
    """A variable-length prefill (--seqlens VARLEN, seed 0: 16 sequences, 32q/8kv x 128, causal): custom-flash-sm90,
    custom-flash, sdpa-flash and sdpa-cudnn run the packed batch (cu_seqlens), sdpa-math the padded one under a mask, and
    sdpa-cudnn again padded (--varlen-layout padded: what padding costs the same backend). TFLOP/s count real
    tokens only (attnprof's FLOPs), so they are the useful rate; the facts say each variant's layout and,
    padded, its wasted share. vs: sdpa-flash (varlen) over the point."""
    variants = pick(["custom-flash-sm90", "custom-flash", "sdpa-flash", "sdpa-cudnn", "sdpa-math"], "sdpa-flash")
    slow = lambda v: max(10, iters // 10) if v in ("sdpa-math", "sdpa-cudnn") else iters
    pts = run_variants(exe, tmp, variants, 16, 32, 8, 8192, 8192, 128, True, iters=slow, seqlens=VARLEN)
    pts += run_variants(exe, tmp, pick(["sdpa-cudnn"], None), 16, 32, 8, 8192, 8192, 128, True, iters=slow,
                        seqlens=VARLEN, padded=True)
    for p in pts:
        if "variable lengths" in p.get("facts", {}):
            # "16 sequences of 130-8100 keys and as many queries, packed (...)": the layout part.
            p["batch"] = p["facts"]["variable lengths"].split(" queries, ", 1)[-1]
    ratio_to(pts, "sdpa-flash")
    # The padded point's ratio too: to sdpa-flash's packed call, the one way to run this batch it has.
    flash = next((p for p in pts if p["variant"] == "sdpa-flash" and p.get("median_us")), None)
    for p in pts:
        if p["mask"].endswith(" padded") and flash and p.get("median_us"):
            p["vs"] = flash["median_us"] / p["median_us"]
    return ("varlen", f"variable-length prefill, --seqlens {VARLEN} (useful TFLOP/s: real tokens only; ratio to "
            "sdpa-flash's varlen call)", pts, "sdpa-flash")


PAGES = (16, 64, 256)


def paged_decode(exe, tmp, iters):
    """Decode from a paged cache (8 x 32q/8kv x 1 x 32768 x 128, pages of PAGES tokens): custom-flash reads
    the pages through the block table; the others gather them first, inside the measured scope. Each paged
    point gets its variant's contiguous median (contiguous_median_us, vs_contiguous) and the K+V bandwidth;
    vs: sdpa-flash on the same pages (gather, then SDPA) over the point."""
    b, hq, hkv, sq, skv, d = 8, 32, 8, 1, 32768, 128
    ceiling = copy_ceiling_gbs()
    variants = pick(["custom-flash", "custom-flash-sm90", "sdpa-flash", "sdpa-cudnn"], "sdpa-flash")
    contiguous = {p["variant"]: p for p in run_variants(exe, tmp, variants, b, hq, hkv, sq, skv, d, True, iters=iters)}
    pts = list(contiguous.values())
    for page in PAGES:
        for p in run_variants(exe, tmp, variants, b, hq, hkv, sq, skv, d, True, iters=iters, page=page):
            c = contiguous.get(p["variant"], {})
            if p.get("median_us") and c.get("median_us"):
                p["contiguous_median_us"] = c["median_us"]
                p["vs_contiguous"] = c["median_us"] / p["median_us"]
            pts.append(p)
    for p in pts:
        if p.get("median_us"):
            p["gbs"] = 2 * b * hkv * skv * d * 2 / (p["median_us"] * 1e-6) / 1e9
            p["pct_copy"] = 100 * p["gbs"] / ceiling if ceiling else None
    ratio_to(pts, "sdpa-flash")
    if ceiling:
        RUN_FIELDS["serving"] = {"copy_ceiling_gbs": ceiling}
    return ("paged", f"paged decode: pages read in the kernel or gathered first (copy ceiling {fmt(ceiling, '.0f')} "
            "GB/s in this run; ratio to sdpa-flash on the same layout)", pts, "sdpa-flash")


def fp8_suite(exe, tmp, iters):
    """Issue 32's points: fp8 against our bf16 kernel and sdpa-cudnn's, each with its error vs float64."""
    pts = []
    variants = pick(["custom-flash-sm90 fp8", "sdpa-auto fp8", "custom-flash-sm90", "sdpa-cudnn"], "sdpa-cudnn")
    for (b, h, s, d) in [(4, 16, 4096, 128), (1, 16, 16384, 128), (4, 16, 8192, 128), (8, 16, 1024, 64)]:
        for causal in (True, False):
            pts += run_variants(exe, tmp, variants, b, h, h, s, s, d, causal, iters=iters)
    ratio_to(pts, "sdpa-cudnn")
    vs_our_bf16(pts)
    # The shapes suite's decode points, against a copy timed only when one of them ran.
    decode = decode_points(exe, tmp, pick(["custom-flash-sm90 fp8", "custom-flash-sm90", "sdpa-flash"], "sdpa-flash"),
                           iters)
    ceiling = copy_ceiling_gbs() if decode else None
    share_of_copy(decode, ceiling)
    ratio_to(decode, "sdpa-flash")
    vs_our_bf16(decode)
    RUN_FIELDS["fp8"] = {"copy_ceiling_gbs": ceiling} if ceiling else {}
    return [("fp8", "fp8: e4m3 against bf16 (ratio to sdpa-cudnn, bf16)", pts, "sdpa-cudnn"),
            ("fp8_decode", f"fp8 decode: K+V bandwidth (copy ceiling {fmt(ceiling, '.0f')} GB/s in this run; "
             "ratio to sdpa-flash, bf16)", decode, "sdpa-flash")]


def vs_our_bf16(pts):
    """Issue 32's target ratio: an fp8 point against custom-flash-sm90 in bf16, same shape, mask and run."""
    ours = {(p["shape"], p["mask"]): p for p in pts if p["variant"] == "custom-flash-sm90"}
    for p in pts:
        o = ours.get((p["shape"], p["mask"]), {})
        if p["variant"].endswith(" fp8") and p.get("median_us") and o.get("median_us"):
            p["vs_our_bf16"] = o["median_us"] / p["median_us"]


# Extra fields of a suite's recorded run (the shapes suite's copy ceiling).
RUN_FIELDS = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attnprof", default="build/attnprof")
    ap.add_argument("--suite", default="forward,shapes,backward")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    ap.add_argument("--variants", help="comma-separated: time only these (and the baselines)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs of each point, variants in alternating order; medians reported (default 1)")
    ap.add_argument("--shapes", help="comma-separated: run only the points of these shapes (e.g. 4x16x4096x128)")
    ap.add_argument("--masks", help="comma-separated: causal, full, window, paged, varlen (default all)")
    bench_records.add_record_flags(ap)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    global CHOSEN, REPEAT, SHAPES, MASKS
    REPEAT = args.repeat
    if args.shapes is not None:
        SHAPES = set(x for x in args.shapes.split(",") if x)
        if not SHAPES:
            ap.error("--shapes: give at least one shape, e.g. 4x16x4096x128")
    if args.masks is not None:
        MASKS = set(x for x in args.masks.split(",") if x)
        if not MASKS or MASKS - {"causal", "full", "window", "paged", "varlen"}:
            ap.error(f"--masks {args.masks}: expected some of causal, full, window, paged, varlen")
    unknown_suites = set(args.suite.split(",")) - {"forward", "shapes", "backward", "serving", "fp8"}
    if unknown_suites:
        ap.error(f"--suite: unknown {', '.join(sorted(unknown_suites))}; valid: forward, shapes, backward, serving, fp8")
    if args.variants is not None:
        CHOSEN = set(v for v in args.variants.split(",") if v)
        if not CHOSEN:
            ap.error("--variants: give at least one variant; valid: " + ", ".join(ALL))
        unknown = CHOSEN - set(ALL)
        if unknown:
            ap.error(f"unknown variant(s) {', '.join(sorted(unknown))}; valid: {', '.join(ALL)}")
    commit = bench_records.commit_for(ap, args)
    suites = {"forward": forward_suite, "shapes": shapes_suite, "backward": backward_suite, "serving": serving_suite,
              "fp8": fp8_suite}
    out, raw, recorded = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="attnprof_bench_") as tmp:
        for name in args.suite.split(","):
            for group, title, pts, base in suites[name](args.attnprof, tmp, args.iters):
                if not pts:  # every point left out by --shapes / --masks
                    continue
                raw[title] = pts
                recorded.setdefault(name, []).extend(record_point(p, group) for p in pts)
                head = [h.format(base=base) for h in HEAD]
                text = table(pts, head, cells)
                if any("gbs" in p for p in pts):
                    text = table(pts, head + ["GB/s", "% of copy"],
                                 lambda p: cells(p) + [fmt(p.get("gbs"), ".0f"), fmt(p.get("pct_copy"), ".0f")])
                out.append(f"### {title}\n\n{text}\n")
                print(out[-1], flush=True)
    if not raw:
        print(f"bench_kernels: no point of suite {args.suite} has shape {args.shapes} and mask {args.masks or 'causal,full'}",
              file=sys.stderr)
        return 2
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(raw, fh, indent=1)
    if args.record:
        try:
            env = bench_records.environment(gpu=ENVIRONMENT.get("device_name"),
                                            torch_version=ENVIRONMENT.get("torch_version"),
                                            cuda=ENVIRONMENT.get("cuda_runtime"))
        except bench_records.RecordError as e:
            print(f"bench_kernels: {e}", file=sys.stderr)
            return 2
        for name, points in recorded.items():
            rc = bench_records.record_or_report(args.record, name, "bench_kernels.py", points, commit, env=env,
                                                fields=RUN_FIELDS.get(name))
            if rc:
                return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
