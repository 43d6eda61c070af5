#!/usr/bin/env python3
"""Fast iteration harness for attnprof's own CUDA kernels (issue 3).

Builds the operator library from the real kernel sources (src/kernels, the
same LibTorch boundary as attnprof) with torch.utils.cpp_extension, checks
attnprof::flash_attention and attnprof::scaled_masked_softmax against float64,
then times them with CUDA events against every SDPA backend. Prints a short
table last.

  python3 scripts/kernel_dev.py --build-only          # compile (no GPU needed)
  python3 scripts/kernel_dev.py                       # build if needed, check, time
  python3 scripts/kernel_dev.py --variants d128first  # also time alternative tile configs

Alternative tile configurations (--variants) are the named tile types of
src/kernels/flash_attention/flash_kernel_traits.h (their kName); each is built
from scripts/kernel_dev_tile_op.cu as its own operator library.
"""
import argparse
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
KERNELS = SRC / "kernels"
TRAITS = KERNELS / "flash_attention" / "flash_kernel_traits.h"
DEFAULT_BUILD = ROOT / "build-kdev" / "ext"

GENCODE = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"]
CUDA_FLAGS = ["-O3", "--expt-relaxed-constexpr", "-Xptxas=-v", "-lineinfo"]
DEFINES = ["-DATTNPROF_HAVE_CUDA_KERNELS=1"]


def tile_types():
    """kName -> tile type, read from flash_kernel_traits.h (none where the sources are absent)."""
    if not TRAITS.exists():
        return {}
    text = TRAITS.read_text()
    return dict((name, ty) for ty, name in
                re.findall(r'struct (FwdTile\w+)[^{]*\{\s*static constexpr const char\* kName = "(\w+)"', text))


def build_main(build_dir: Path):
    """Every kernel source (the .cu files and the LibTorch boundary), as attnprof builds
    them, plus the development operators of kernel_dev_plan_ops.cpp (attnprof_dev::)."""
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = (sorted(KERNELS.glob("*.cpp")) + sorted(KERNELS.glob("*/*.cpp")) + sorted(KERNELS.glob("*/*.cu"))
               + [ROOT / "scripts" / "kernel_dev_plan_ops.cpp"])
    load(name="attnprof_kernels", sources=[str(s) for s in sources],
         extra_cflags=["-O3"] + DEFINES, extra_cuda_cflags=CUDA_FLAGS + GENCODE + DEFINES,
         extra_include_paths=[str(SRC)], build_directory=str(build_dir), is_python_module=False,
         verbose=True)
    return build_dir / "attnprof_kernels.so"


def build_variant(name: str, build_dir: Path):
    tiles = tile_types()
    if name not in tiles:
        sys.exit(f"unknown variant {name!r}; tiles in {TRAITS.name}: {', '.join(tiles)}")
    vdir = build_dir / f"v_{name}"
    vdir.mkdir(parents=True, exist_ok=True)
    lib = f"attnprof_{name}"
    defines = DEFINES + [f"-DKDEV_TILE={tiles[name]}", f"-DKDEV_LIB={lib}",
                         f"-Dattnprof=attnprof_ns_{name}"]
    sources = [ROOT / "scripts" / "kernel_dev_tile_op.cu", KERNELS / "flash_attention" / "flash_fwd_api.cpp",
               KERNELS / "flash_attention" / "flash_fwd_plan.cpp"]
    load(name=lib, sources=[str(s) for s in sources], extra_cflags=["-O3"] + defines,
         extra_cuda_cflags=CUDA_FLAGS + ["-gencode=arch=compute_90a,code=sm_90a"] + defines,
         extra_include_paths=[str(SRC)], build_directory=str(vdir), is_python_module=False,
         verbose=True)
    return vdir / f"{lib}.so"


# ---------------------------------------------------------------- correctness
def rel_err(x, ref):
    ref = ref.double()
    d = ref.norm().item()
    n = (x.double() - ref).norm().item()
    return n / d if d > 0 else n


def masked(s, scale, causal):
    s = s * scale
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]  # bottom-right aligned: key j visible to query i iff j <= i + sk - sq
        m = torch.ones(sq, sk, dtype=torch.bool, device=s.device).triu(sk - sq + 1)
        s = s.masked_fill(m, float("-inf"))
    return s


def attention_plain(q, k, v, causal, scale):
    return torch.softmax(masked(q @ k.transpose(-2, -1), scale, causal), -1) @ v


def check_flash(ops):
    """Every op on the same fresh inputs; the float64 reference is computed once per case."""
    failures = {label: 0 for label in ops}
    worst = {label: 0.0 for label in ops}
    cases = 0
    for seq in (1, 17, 63, 64, 65, 1000, 1025, 4096):
        bhs = [(1, 3)] if seq == 4096 else [(1, 1), (3, 5)]
        for b, h in bhs:
            for d in (64, 128):
                for dt in (torch.bfloat16, torch.float16):
                    for causal in (False, True):
                        q, k, v = (torch.randn(b, h, seq, d, device="cuda", dtype=dt) for _ in range(3))
                        scale = 1 / math.sqrt(d)
                        qd, kd, vd = q.double(), k.double(), v.double()
                        s = masked(qd @ kd.transpose(-2, -1), scale, causal)
                        ref = torch.softmax(s, -1) @ vd
                        lse_ref = torch.logsumexp(s, -1)
                        del s
                        err_plain = rel_err(attention_plain(q, k, v, causal, scale), ref)
                        lse_tol = 1e-3 * (1 + lse_ref.abs().max().item())
                        cases += 1
                        for label, op in ops.items():
                            torch.full((b, h, seq, d), float("nan"), device="cuda", dtype=dt)  # poison
                            torch.full((b, h, seq), float("nan"), device="cuda", dtype=torch.float32)
                            out, lse = op(q, k, v, causal, scale)
                            err = rel_err(out, ref)
                            lse_err = (lse.double() - lse_ref).abs().max().item()
                            finite = bool(torch.isfinite(out).all()) and bool(torch.isfinite(lse).all())
                            ok = finite and err <= 2 * err_plain + 1e-6 and err <= 1e-2 and lse_err <= lse_tol
                            worst[label] = max(worst[label], err)
                            if not ok:
                                failures[label] += 1
                                print(f"  FAIL {label} b{b} h{h} s{seq} d{d} {dt} causal={causal}: "
                                      f"err {err:.3e} plain {err_plain:.3e} lse_err {lse_err:.2e} "
                                      f"finite {finite}")
    for label in ops:
        print(f"flash[{label}] correctness: {cases - failures[label]}/{cases} pass, "
              f"worst rel err {worst[label]:.2e}")
    return all(f == 0 for f in failures.values())


def check_softmax(op):
    failures, cases = 0, 0
    shapes = [((2, 3, 17, 17), torch.bfloat16), ((1, 1, 1, 1), torch.bfloat16),
              ((2, 3, 64, 64), torch.float16), ((3, 5, 65, 65), torch.bfloat16),
              ((1, 2, 1000, 1000), torch.float16), ((1, 2, 1025, 1025), torch.bfloat16),
              ((1, 2, 4096, 4096), torch.bfloat16), ((1, 1, 3000, 8192), torch.float16),
              ((2, 2, 100, 2048), torch.float32), ((1, 2, 300, 4096), torch.float32),
              ((7, 1000), torch.float32), ((2, 3, 40, 264), torch.bfloat16)]
    for shape, dt in shapes:
        for causal in (False, True):
            s = torch.randn(shape, device="cuda", dtype=dt) * 4
            torch.full(shape, float("nan"), device="cuda", dtype=dt)  # poison
            p = op(s, 0.37, causal)
            ref = torch.softmax(masked(s.double(), 0.37, causal), -1)
            err = rel_err(p, ref)
            err_plain = rel_err(torch.softmax(masked(s, 0.37, causal), -1), ref)
            ok = bool(torch.isfinite(p).all()) and err <= 2 * err_plain + 1e-6 and err <= 1e-2
            cases += 1
            if not ok:
                failures += 1
                print(f"  FAIL softmax {shape} {dt} causal={causal}: err {err:.3e} plain {err_plain:.3e}")
    s = torch.randn(2, 8, 4096, device="cuda", dtype=torch.bfloat16)
    s[:, 3] = float("-inf")
    p = op(s, 0.5, True)
    ok = bool(torch.isfinite(p).all()) and bool((p[:, 3] == 0).all())
    cases += 1
    failures += 0 if ok else 1
    print(f"softmax correctness: {cases - failures}/{cases} pass")
    return failures == 0


# --------------------------------------------------------------------- timing
def bench_us(fn, arg_sets, iters=100, warmup=10):
    """Median µs per call over `iters` back-to-back calls, each between two events,
    rotating through arg_sets (so inputs that fit in L2 are not reused hot)."""
    for i in range(warmup):
        fn(*arg_sets[i % len(arg_sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        a = arg_sets[i % len(arg_sets)]
        starts[i].record()
        fn(*a)
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def sdpa_backends():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return [("sdpa-flash", SDPBackend.FLASH_ATTENTION, sdpa_kernel),
            ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION, sdpa_kernel),
            ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION, sdpa_kernel)]


# The issue-12 shapes (grouped-query heads, decode, chunked prefill) and the
# square multi-head shapes of BENCHMARKS.md, for regressions:
# (label, batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, causal).
# causal is bottom-right aligned (attnprof::flash_attention's definition);
# decode is one query against the whole cache, i.e. unmasked.
BENCH_SHAPES = [
    ("decode", 8, 32, 8, 1, 4096, 128, False),
    ("decode", 8, 32, 8, 1, 32768, 128, False),
    ("decode", 8, 32, 8, 1, 131072, 128, False),
    ("chunked prefill", 1, 32, 8, 512, 8192, 128, True),
    ("chunked prefill", 1, 32, 8, 512, 32768, 128, True),
    ("GQA prefill", 4, 32, 8, 4096, 4096, 128, True),
    ("GQA prefill", 4, 32, 8, 4096, 4096, 128, False),
    ("MHA", 8, 16, 16, 1024, 1024, 64, True),
    ("MHA", 8, 16, 16, 1024, 1024, 64, False),
    ("MHA", 4, 16, 16, 4096, 4096, 128, True),
    ("MHA", 4, 16, 16, 4096, 4096, 128, False),
    ("MHA", 1, 16, 16, 16384, 16384, 128, True),
    ("MHA", 1, 16, 16, 16384, 16384, 128, False),
]


def shape_str(b, hq, hkv, sq, skv, d):
    heads = f"{hq}" if hq == hkv else f"{hq}q/{hkv}kv"
    seq = f"{sq}" if sq == skv else f"{sq}q/{skv}kv"
    return f"{b}x{heads}x{seq}x{d}"


def attention_flops(b, hq, sq, skv, d, causal):
    """4·B·H·(query, key pairs)·D. A square causal shape counts half the pairs (as
    BENCHMARKS.md always has); otherwise the pairs bottom-right causal leaves visible."""
    if not causal:
        pairs = sq * skv
    elif sq == skv:
        pairs = sq * skv / 2
    else:
        pairs = sum(min(skv, max(0, i + skv - sq + 1)) for i in range(sq))
    return 4 * b * hq * pairs * d


def sdpa_fn(hq, hkv, sq, skv, causal):
    """F.scaled_dot_product_attention with this shape's semantics: enable_gqa where
    the heads differ, and the lower-right causal bias where seq_q != seq_kv (is_causal
    is top-left there)."""
    gqa = {"enable_gqa": True} if hq != hkv else {}
    if not causal:
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **gqa)
    if sq == skv:
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
    from torch.nn.attention.bias import causal_lower_right
    bias = causal_lower_right(sq, skv)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias, **gqa)


def input_sets(b, hq, hkv, sq, skv, d):
    """Rotated input sets: up to 4 while q, k, v together stay under ~150 MB, so
    inputs that fit in L2 are not re-read hot (same rule as before, for comparable
    figures)."""
    nbytes = 2 * d * b * (hq * sq + 2 * hkv * skv)
    n = max(1, min(4, (150 * 2**20) // nbytes + 1))
    return [(torch.randn(b, hq, sq, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, skv, d, device="cuda", dtype=torch.bfloat16)) for _ in range(n)]


def copy_ceiling_gbs():
    """Device-to-device copy bandwidth (bytes read + written per second) of 1 GiB."""
    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = bench_us(lambda a, b: b.copy_(a), [(src, dst)], iters=30, warmup=3)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * 2**30 / us / 1e3


def time_shapes(flash_ops, describe, ceiling, rows, details, extra_ops=()):
    for label, b, hq, hkv, sq, skv, d, causal in BENCH_SHAPES:
        mask = "causal" if causal else "full"
        shape = shape_str(b, hq, hkv, sq, skv, d)
        flops = attention_flops(b, hq, sq, skv, d, causal)
        kv_bytes = 2 * b * hkv * skv * d * 2
        sets = input_sets(b, hq, hkv, sq, skv, d)
        scale = 1 / math.sqrt(d)
        q, k, v = sets[0]
        details.append(f"{label} {shape} {mask}: custom-flash runs {describe(q, k, causal)}")
        ours = flash_ops["custom-flash"](q, k, v, causal, scale)[0]
        results = {}
        ref_fn = sdpa_fn(hq, hkv, sq, skv, causal)
        for name, backend, ctx in sdpa_backends():
            try:
                with ctx(backend):
                    out = ref_fn(q, k, v)
                    diff = rel_err(ours, out)
                    us = bench_us(ref_fn, sets)
                results[name] = us
                if diff > 2e-2:
                    details.append(f"  WARNING {name} differs from custom-flash by {diff:.2e} at {shape} {mask}")
            except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
                details.append(f"  {name} does not run {shape} {mask}: {str(e).splitlines()[0][:150]}")
        best_name = min(results, key=results.get) if results else None
        for label_op, op in flash_ops.items():
            if label_op in extra_ops and (hq != hkv or sq != skv):
                continue  # an older build may not check these shapes: never launch it on them
            results[label_op] = bench_us(lambda q, k, v: op(q, k, v, causal, scale), sets)
        for name, us in results.items():
            gbs = kv_bytes / us / 1e3
            rows.append(dict(label=label, shape=shape, mask=mask, variant=name, us=us,
                             tflops=flops / us / 1e6, gbs=gbs, copy=100 * gbs / ceiling,
                             vs_best=(results[best_name] / us) if best_name else float("nan"),
                             best=best_name))
            print(f"  {label:15s} {shape:22s} {mask:6s} {name:24s} {us:10.1f} us {flops / us / 1e6:7.1f} TFLOP/s "
                  f"{gbs:7.0f} GB/s K+V ({100 * gbs / ceiling:5.1f}% of copy)", flush=True)
        del sets, q, k, v, ours
        torch.cuda.empty_cache()


def time_crossover(plan_op, describe_plan, rows_out):
    """Decode vs prefill path, forced, as the query rows per KV head grow (batch 8,
    8192 keys, d128; 32q/8kv and 16q/16kv): where the planner's crossover should sit."""
    d, skv, b = 128, 8192, 8
    for hq, hkv in ((32, 8), (16, 16)):
        for sq in (1, 8, 16, 32, 64, 128):
            sets = input_sets(b, hq, hkv, sq, skv, d)
            scale = 1 / math.sqrt(d)
            t = {}
            for path in ("decode", "prefill"):
                t[path] = bench_us(lambda q, k, v: plan_op(q, k, v, False, scale, path, 0), sets)
            planned = describe_plan(sets[0][0], sets[0][1], False, "auto", 0).split(",")[0]
            rows_out.append((f"{hq}q/{hkv}kv", sq, sq * hq // hkv, t["decode"], t["prefill"], planned))
            print(f"  crossover {hq}q/{hkv}kv sq {sq:3d} ({sq * hq // hkv:4d} rows per KV head): decode "
                  f"{t['decode']:8.1f} us, prefill {t['prefill']:8.1f} us, planner: {planned}", flush=True)
            del sets
    torch.cuda.empty_cache()


def time_splits(plan_op, describe_plan, rows_out):
    """The decode kernel at 8x32q/8kv x 32768 keys with the number of splits forced,
    against the planner's choice."""
    b, hq, hkv, sq, skv, d = 8, 32, 8, 1, 32768, 128
    sets = input_sets(b, hq, hkv, sq, skv, d)
    scale = 1 / math.sqrt(d)
    kv_bytes = 2 * b * hkv * skv * d * 2
    for splits in (0, 1, 2, 4, 8, 16, 33, 64):
        us = bench_us(lambda q, k, v: plan_op(q, k, v, False, scale, "decode", splits), sets)
        what = describe_plan(sets[0][0], sets[0][1], False, "decode", splits)
        n = re.search(r"in (\d+) splits", what)
        rows_out.append((splits, int(n.group(1)) if n else 1, us, kv_bytes / us / 1e3))
        print(f"  decode splits {'planner' if splits == 0 else splits}: {us:8.1f} us, "
              f"{kv_bytes / us / 1e3:6.0f} GB/s ({what.split('>: ', 1)[-1].split(';')[0].strip()})", flush=True)
    del sets
    torch.cuda.empty_cache()


def time_softmax(softmax_op, rows):
    b, h, s = 4, 16, 4096
    x = torch.randn(b, h, s, s, device="cuda", dtype=torch.bfloat16)
    nbytes = 2 * x.numel() * x.element_size()  # read + write
    for causal in (False, True):
        us = bench_us(lambda t: softmax_op(t, 0.125, causal), [(x,)], iters=50, warmup=5)
        note = "all bytes" if not causal else "masked half not read; bytes counted as full"
        rows.append((f"{b}x{h}x{s}x{s}", "causal" if causal else "full", "scaled_masked_softmax (GB/s)",
                     us, nbytes / us / 1e3, float("nan")))
        print(f"  softmax {b}x{h}x{s}x{s} bf16 causal={causal}: {us:.1f} us, "
              f"{nbytes / us / 1e3:.0f} GB/s ({note}); "
              f"{100 * nbytes / us / 1e3 / 4300:.0f}% of 4.3 TB/s", flush=True)
    # torch's own softmax on the same tensor, for scale
    us = bench_us(lambda t: torch.softmax(t, -1), [(x,)], iters=50, warmup=5)
    print(f"  torch.softmax same tensor: {us:.1f} us, {nbytes / us / 1e3:.0f} GB/s")
    del x
    torch.cuda.empty_cache()


def time_pipelines(softmax_op, rows):
    b, h, s, d = 4, 16, 4096, 128
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = 1 / math.sqrt(d)
    mask = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1)

    def inplace(q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        scores.masked_fill_(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, -1), v)

    def custom(q, k, v):
        return torch.matmul(softmax_op(torch.matmul(q, k.transpose(-2, -1)), scale, True), v)

    ref = inplace(q, k, v)
    err = rel_err(custom(q, k, v), ref)
    t_in = bench_us(inplace, [(q, k, v)], iters=30, warmup=3)
    t_cu = bench_us(custom, [(q, k, v)], iters=30, warmup=3)
    flops = 4 * b * h * s * s * d / 2
    for name, us in (("inplace", t_in), ("custom-softmax", t_cu)):
        rows.append((f"{b}x{h}x{s}x{d}", "causal", name, us, flops / us / 1e6, t_in / us))
    print(f"  pipeline {b}x{h}x{s}x{d} causal: inplace {t_in:.0f} us, custom-softmax {t_cu:.0f} us, "
          f"speed-up x{t_in / t_cu:.2f} (rel diff vs inplace {err:.1e})", flush=True)


def profile_check(flash_op, softmax_op, details):
    """One profiled forward each: the operator rows and the GPU kernels the trace shows."""
    from torch.profiler import ProfilerActivity, profile
    q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qd = torch.randn(8, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    kd, vd = (torch.randn(8, 8, 32768, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = 1 / math.sqrt(64)

    def custom_softmax():
        return torch.matmul(softmax_op(torch.matmul(q, k.transpose(-2, -1)), scale, True), v)

    kd4, vd4 = kd[:, :, :4096].contiguous(), vd[:, :, :4096].contiguous()
    for label, fn in (("custom-flash 8x16x1024x64", lambda: flash_op(q, k, v, True, scale)),
                      ("custom-flash decode 8x32q/8kvx1q/32768kvx128", lambda: flash_op(qd, kd, vd, False, 0.088)),
                      ("custom-flash decode 8x32q/8kvx1q/4096kvx128", lambda: flash_op(qd, kd4, vd4, False, 0.088)),
                      ("custom-softmax 8x16x1024x64", custom_softmax)):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        ops = sorted({e.key for e in prof.key_averages() if e.key.startswith("attnprof::")})
        kernels = [(e.name, e.device_time) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA]
        line = (f"profile {label}: operator rows {ops}; {len(kernels)} GPU kernels (GPU µs): "
                f"{[(re.sub(r'<.*', '', name.replace('void ', '')), round(us, 1)) for name, us in kernels]}")
        details.append(line)
        print("  " + line, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--build-dir", default=str(DEFAULT_BUILD))
    ap.add_argument("--variants", default="", help="comma list of tile names: " + ",".join(tile_types()))
    ap.add_argument("--no-build", action="store_true", help="load the prebuilt libraries as they are")
    ap.add_argument("--extra-op", action="append", default=[], metavar="LIB:NAMESPACE",
                    help="also time NAMESPACE::flash_attention from library LIB (e.g. an older build), "
                         "at the square multi-head shapes only")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the float64 checks (tests/test_custom_kernels.cpp has the full ones)")
    ap.add_argument("--flash-only", action="store_true",
                    help="time only the fused-attention kernels (no softmax or pipeline timing)")
    args = ap.parse_args()
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 2))
    build_dir = Path(args.build_dir)
    variants = [v for v in args.variants.split(",") if v]

    t0 = time.time()
    libs = {}
    loaded = False
    if args.no_build:
        libs["custom-flash"] = build_dir / "attnprof_kernels.so"
        for v in variants:
            libs[f"custom-flash[{v}]"] = build_dir / f"v_{v}" / f"attnprof_{v}.so"
        try:
            for p in libs.values():
                torch.ops.load_library(str(p))
            loaded = True
        except (OSError, RuntimeError) as e:  # built on another image: build here instead
            print(f"prebuilt libraries did not load ({e}); building", flush=True)
            build_dir = Path("/tmp/attnprof-kdev")
    if not loaded:
        libs["custom-flash"] = build_main(build_dir)
        for v in variants:
            libs[f"custom-flash[{v}]"] = build_variant(v, build_dir)
        for p in libs.values():
            torch.ops.load_library(str(p))
    print(f"build/load: {time.time() - t0:.1f} s", flush=True)
    if args.build_only:
        return 0

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    flash_ops = {"custom-flash": torch.ops.attnprof.flash_attention}
    for v in variants:
        flash_ops[f"custom-flash[{v}]"] = getattr(torch.ops, f"attnprof_{v}").flash_attention
    extra_ops = []
    for spec in args.extra_op:
        lib, ns = spec.rsplit(":", 1)
        torch.ops.load_library(lib)
        flash_ops[f"custom-flash[{ns}]"] = getattr(torch.ops, ns).flash_attention
        extra_ops.append(f"custom-flash[{ns}]")
    softmax_op = torch.ops.attnprof.scaled_masked_softmax
    plan_op = torch.ops.attnprof_dev.flash_attention_plan
    describe_plan = torch.ops.attnprof_dev.describe_plan

    ok = True
    if not args.no_check:
        ok = check_flash(flash_ops)
        ok &= check_softmax(softmax_op)
        print(f"correctness: {'ALL PASS' if ok else 'FAILURES'}", flush=True)

    details = []
    profile_check(flash_ops["custom-flash"], softmax_op, details)
    ceiling = copy_ceiling_gbs()
    print(f"  device-to-device copy ceiling: {ceiling:.0f} GB/s (read + write of 1 GiB)", flush=True)
    rows, crossover, splits, other = [], [], [], []
    time_shapes(flash_ops, lambda q, k, causal: describe_plan(q, k, causal, "auto", 0), ceiling, rows, details,
                extra_ops)
    time_crossover(plan_op, describe_plan, crossover)
    time_splits(plan_op, describe_plan, splits)
    if not args.flash_only:
        time_softmax(softmax_op, other)
        time_pipelines(softmax_op, other)

    print("\n" + "\n".join(details))
    print("\nAll timings (CUDA-event medians of back-to-back calls, bf16):\n")
    print("| shape | mask | variant | µs | TFLOP/s | K+V GB/s | % of copy | vs best SDPA |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['shape']} | {r['mask']} | {r['variant']} | {r['us']:.1f} | {r['tflops']:.1f} | "
              f"{r['gbs']:.0f} | {r['copy']:.1f} | {r['vs_best']:.2f} |")
    for shape, mask, name, us, rate, ratio in other:
        print(f"| {shape} | {mask} | {name} | {us:.1f} | {rate:.1f} (GB/s or TFLOP/s) | | | {ratio:.2f} |")
    print("\nDecode vs prefill path (batch 8 x 8192 keys x 128, forced):\n")
    print("| heads | seq_q | rows per KV head | decode µs | prefill µs | planner |")
    print("|---|---|---|---|---|---|")
    for heads, sq, rpg, td, tp, planned in crossover:
        print(f"| {heads} | {sq} | {rpg} | {td:.1f} | {tp:.1f} | {planned} |")
    print("\nDecode splits (8 x 32q/8kv x 1 x 32768 x 128; 0 = planner):\n")
    print("| forced | splits | µs | K+V GB/s |")
    print("|---|---|---|---|")
    for forced, n, us, gbs in splits:
        print(f"| {forced} | {n} | {us:.1f} | {gbs:.0f} |")

    # Last: one row per shape, custom-flash against the fastest SDPA backend.
    print(f"\ncopy ceiling {ceiling:.0f} GB/s; custom-flash against the fastest SDPA backend "
          f"that runs the shape (enable_gqa, lower-right causal bias):\n")
    print("| shape | mask | ours | µs | TFLOP/s | %copy | best SDPA | its µs | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if not r["variant"].startswith("custom-flash"):
            continue
        best = next((x for x in rows if x["shape"] == r["shape"] and x["mask"] == r["mask"]
                     and x["variant"] == r["best"]), None)
        pct = f"{r['copy']:.0f}" if r["label"] == "decode" else ""
        print(f"| {r['shape']} | {r['mask']} | {r['variant']} | {r['us']:.1f} | {r['tflops']:.0f} | {pct} | "
              f"{r['best'] or 'none'} | {best['us'] if best else float('nan'):.1f} | {r['vs_best']:.2f} |")
    if not args.no_check:
        print(f"\ncorrectness: {'ALL PASS' if ok else 'FAILURES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
