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
    """kName -> tile type, read from flash_kernel_traits.h."""
    text = TRAITS.read_text()
    return dict((name, ty) for ty, name in
                re.findall(r'struct (FwdTile\w+)[^{]*\{\s*static constexpr const char\* kName = "(\w+)"', text))


def build_main(build_dir: Path):
    """Every kernel source (the .cu files and the LibTorch boundary), as attnprof builds them."""
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(KERNELS.glob("*.cpp")) + sorted(KERNELS.glob("*/*.cpp")) + sorted(KERNELS.glob("*/*.cu"))
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
    sources = [ROOT / "scripts" / "kernel_dev_tile_op.cu", KERNELS / "flash_attention" / "flash_fwd_api.cpp"]
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
        m = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool, device=s.device).triu(1)
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


def time_attention(flash_ops, shapes, rows):
    for (b, h, s, d) in shapes:
        for causal in (True, False):
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            nsets = max(1, min(4, (3 * 50 * 2**20) // (3 * b * h * s * d * 2) + 1))
            sets = [tuple(torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                    for _ in range(nsets)]
            scale = 1 / math.sqrt(d)
            results = {}
            for name, backend, ctx in sdpa_backends():
                try:
                    with ctx(backend):
                        us = bench_us(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), sets)
                    results[name] = us
                except RuntimeError as e:
                    print(f"  {name} unavailable at {b}x{h}x{s}x{d}: {str(e).splitlines()[0][:100]}")
            best_sdpa = min(results.values()) if results else float("nan")
            for label, op in flash_ops.items():
                results[label] = bench_us(lambda q, k, v: op(q, k, v, causal, scale), sets)
            shape = f"{b}x{h}x{s}x{d}"
            for name, us in results.items():
                rows.append((shape, "causal" if causal else "full", name, us, flops / us / 1e6,
                             best_sdpa / us))
                print(f"  {shape} {'causal' if causal else 'full':6s} {name:22s} {us:9.1f} us "
                      f"{flops / us / 1e6:7.1f} TFLOP/s  x{best_sdpa / us:.2f} vs best sdpa", flush=True)
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


def profile_check(flash_op, softmax_op):
    """One profiled forward each: the operator rows and the GPU kernels the trace shows."""
    from torch.profiler import ProfilerActivity, profile
    q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = 1 / math.sqrt(64)

    def custom_softmax():
        return torch.matmul(softmax_op(torch.matmul(q, k.transpose(-2, -1)), scale, True), v)

    for label, fn in (("custom-flash", lambda: flash_op(q, k, v, True, scale)),
                      ("custom-softmax", custom_softmax)):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        ops = sorted({e.key for e in prof.key_averages() if e.key.startswith("attnprof::")})
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"  profile {label}: operator rows {ops}; {len(kernels)} GPU kernels: "
              f"{[name[:70] for name in kernels]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--build-dir", default=str(DEFAULT_BUILD))
    ap.add_argument("--variants", default="", help="comma list of tile names: " + ",".join(tile_types()))
    ap.add_argument("--no-build", action="store_true", help="load the prebuilt libraries as they are")
    ap.add_argument("--skip-big", action="store_true", help="skip the 1x16x16384x128 shape")
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
    print(f"build/load: {time.time() - t0:.1f} s", flush=True)
    if args.build_only:
        return 0

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    flash_ops = {"custom-flash": torch.ops.attnprof.flash_attention}
    for v in variants:
        flash_ops[f"custom-flash[{v}]"] = getattr(torch.ops, f"attnprof_{v}").flash_attention
    softmax_op = torch.ops.attnprof.scaled_masked_softmax

    ok = check_flash(flash_ops)
    ok &= check_softmax(softmax_op)
    print(f"correctness: {'ALL PASS' if ok else 'FAILURES'}", flush=True)

    profile_check(flash_ops["custom-flash"], softmax_op)
    rows = []
    shapes = [(8, 16, 1024, 64), (4, 16, 4096, 128)]
    if not args.skip_big:
        shapes.append((1, 16, 16384, 128))
    time_attention(flash_ops, shapes, rows)
    if not args.flash_only:
        time_softmax(softmax_op, rows)
        time_pipelines(softmax_op, rows)

    print("\n| shape | mask | variant | µs (median) | TFLOP/s or GB/s | vs best SDPA (pipeline: vs inplace) |")
    print("|---|---|---|---|---|---|")
    for shape, mask, name, us, rate, ratio in rows:
        ratio_s = "" if math.isnan(ratio) else f"{ratio:.2f}"
        print(f"| {shape} | {mask} | {name} | {us:.1f} | {rate:.1f} | {ratio_s} |")
    print(f"\ncorrectness: {'ALL PASS' if ok else 'FAILURES'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
