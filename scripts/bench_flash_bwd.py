#!/usr/bin/env python3
"""Op-level timing of the attention backward: attnprof's Hopper kernel
(attnprof::flash_attention_backward_sm90) and its portable one
(attnprof::flash_attention_backward) against SDPA's FlashAttention-2 and cuDNN
backward, in one Python process.

Only the backward is timed. Ours: the operator called on the saved q, k, v,
out, lse of one forward. SDPA: torch.autograd.grad on a retained graph of one
forward. Each figure is the median over --reps repetitions of --calls
back-to-back calls between two CUDA events, the backends interleaved in a
random order with --settle untimed calls each first (scripts/bench_flash_sm90.py
explains why). TFLOP/s count 2.5 x the forward's 4*B*H*S^2*D, half for causal.

  python3 scripts/bench_flash_bwd.py [--lib build/libattnprof_core.so] [--shapes 8x16x1024x64,4x32/8x4096x128,...]
    (BxHxSxD, or BxHq/HkvxSxD for grouped-query heads)
  --host: host time per call of each operator on a tiny problem (the GPU idles; launch cost only)
  --profile BxHxSxD [--causal]: run the Hopper backward 3 times, then once more (for ncu) and exit
  --configs A,B: also the Hopper backward's configurations by name (alternatives are built with
    -DATTNPROF_KERNEL_CONFIGS); a configuration for another head dim is refused at that shape
  --record DIR [--commit SHA]: also add the table to DIR/op_backward.json, the records
    BENCHMARKS.md is made from (scripts/bench_records.py)
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_records  # noqa: E402
from bench_flash_sm90 import parse_shape, require_cuda, time_fns  # noqa: E402

SHAPES = [(8, 16, 1024, 64, 16), (4, 16, 4096, 128, 16), (1, 16, 16384, 128, 16)]


def parse_bwd_shape(text):
    """BxHxSxD or BxHq/HkvxSxD -> (b, hq, s, d, hkv)."""
    head, _, rest = text.partition("/")
    try:
        if rest:
            b, hq = (int(x) for x in head.split("x"))
            hkv, sq, d = (int(x) for x in rest.split("x"))
            shape = (b, hq, sq, d, hkv)
        else:
            b, hq, sq, d = parse_shape(text)
            shape = (b, hq, sq, d, hq)
    except (ValueError, argparse.ArgumentTypeError):
        shape = ()
    if len(shape) != 5 or min(shape) < 1 or shape[1] % shape[4]:
        raise argparse.ArgumentTypeError(f"{text!r} is not BxHxSxD or BxHq/HkvxSxD (positive integers, Hq a multiple "
                                         "of Hkv, e.g. 8x16x1024x64 or 4x32/8x4096x128)")
    return shape


def label(shape):
    b, hq, s, d, hkv = shape
    return bench_records.shape_label(b, hq, hkv, s, s, d)


def bwd_flops(shape, causal):
    b, h, s, d = shape[:4]
    f = 2.5 * 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def ours(op_name, q, k, v, dout, causal, scale, ns="attnprof", config=None):
    out, lse = torch.ops.attnprof.flash_attention_sm90(q, k, v, causal, scale)
    op = getattr(getattr(torch.ops, ns), op_name)
    by_name = () if config is None else (config,)
    return lambda: op(dout, q, k, v, out, lse, causal, scale, *by_name)


def host_costs():
    """Host µs per call, 1x1x128x64 causal bf16: each call's GPU work takes a
    few µs, so back-to-back calls measure what the host spends per call."""
    import time
    q, k, v, dout = (torch.randn(1, 1, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out, lse = torch.ops.attnprof.flash_attention_sm90(q, k, v, True, 0.125)
    calls = {
        "attnprof::flash_attention (fwd)": lambda: torch.ops.attnprof.flash_attention(q, k, v, True, 0.125),
        "attnprof::flash_attention_sm90 (fwd)": lambda: torch.ops.attnprof.flash_attention_sm90(q, k, v, True, 0.125),
        "attnprof::flash_attention_backward": lambda: torch.ops.attnprof.flash_attention_backward(
            dout, q, k, v, out, lse, True, 0.125),
        "attnprof::flash_attention_backward_sm90": lambda: torch.ops.attnprof.flash_attention_backward_sm90(
            dout, q, k, v, out, lse, True, 0.125),
        "sdpa-flash fwd": lambda: sdpa_fwd(SDPBackend.FLASH_ATTENTION, q, k, v),
        "sdpa-cudnn fwd": lambda: sdpa_fwd(SDPBackend.CUDNN_ATTENTION, q, k, v),
    }
    for name, fn in calls.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(500):
            fn()
        host = (time.perf_counter() - t0) / 500 * 1e6
        torch.cuda.synchronize()
        print(f"  host per call {host:7.1f} µs  {name}")


def sdpa_fwd(backend, q, k, v):
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sdpa(backend, q, k, v, dout, causal, scale):
    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale,
                                             enable_gqa=q.shape[1] != k.shape[1])
    return lambda: torch.autograd.grad(out, (qg, kg, vg), dout, retain_graph=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libattnprof_core.so")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--settle", type=int, default=10)
    ap.add_argument("--shapes", type=lambda t: [parse_bwd_shape(x) for x in t.split(",")],
                    help="comma-separated BxHxSxD or BxHq/HkvxSxD (default: the three benchmark shapes)")
    ap.add_argument("--host", action="store_true", help="print the host cost per operator call first")
    ap.add_argument("--profile", type=parse_shape,
                    help="BxHxSxD: run the Hopper backward after 3 warm-up calls (for ncu) and exit")
    ap.add_argument("--causal", action="store_true", help="with --profile")
    ap.add_argument("--configs", type=lambda t: [c for c in t.split(",") if c], default=[],
                    help="comma-separated: also these Hopper backward configurations by name")
    bench_records.add_record_flags(ap)
    args = ap.parse_args()
    require_cuda(ap)
    commit = bench_records.commit_for(ap, args)
    torch.ops.load_library(args.lib)
    prop = torch.cuda.get_device_properties(0)
    print(f"device: {prop.name}, {prop.multi_processor_count} SMs, torch {torch.__version__}")
    built = list(torch.ops.attnprof.flash_attention_sm90_configs(True))
    for c in args.configs:
        if c not in built:
            ap.error(f"--configs {c}: not in this build (built: {', '.join(built)}; alternatives are built with "
                     "-DATTNPROF_KERNEL_CONFIGS)")
    if args.profile:
        b, h, s, d = args.profile
        q, k, v, dout = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        fn = (ours("flash_attention_backward_sm90_config", q, k, v, dout, args.causal, d ** -0.5,
                   config=args.configs[0]) if args.configs else
              ours("flash_attention_backward_sm90", q, k, v, dout, args.causal, d ** -0.5))
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
        return 0
    if args.host:
        host_costs()
    shapes = args.shapes or SHAPES
    names = ["sm90", "portable", "sdpa-flash", "sdpa-cudnn"] + [f"sm90 {c}" for c in args.configs]
    rows = []
    for shape in shapes:
        b, h, s, d, hkv = shape
        q, dout = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for causal in (True, False):
            scale = d ** -0.5
            fns = [ours("flash_attention_backward_sm90", q, k, v, dout, causal, scale),
                   ours("flash_attention_backward", q, k, v, dout, causal, scale)]
            for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
                try:
                    fns.append(sdpa(backend, q, k, v, dout, causal, scale))
                except RuntimeError as e:
                    print(f"  {backend} refused: {str(e).splitlines()[0]}")
                    fns.append(lambda: (_ for _ in ()).throw(RuntimeError("refused")))
            fns += [ours("flash_attention_backward_sm90_config", q, k, v, dout, causal, scale, config=c)
                    for c in args.configs]
            us = time_fns([lambda *_, f=f: f() for f in fns], [()], args.calls, args.reps, args.settle)
            rows.append((shape, causal, us))
            del fns
        del q, k, v, dout
        torch.cuda.empty_cache()
    print("| shape | mask | " + " | ".join(f"{n} µs (TFLOP/s)" for n in names) +
          " | sm90 / sdpa-flash | sm90 / sdpa-cudnn |" + "".join(f" {c} / sm90 |" for c in args.configs))
    print("|---|---|" + "---|" * (len(names) + 2 + len(args.configs)))
    points = []
    for shape, causal, us in rows:
        tf = [bwd_flops(shape, causal) / (t * 1e-6) / 1e12 for t in us]
        cells = " | ".join(f"{t:.0f} ({x:.0f})" if math.isfinite(t) else "refused" for t, x in zip(us, tf))
        print(f"| {label(shape)} | {'causal' if causal else 'full'} | {cells} | "
              f"{us[2] / us[0]:.2f} | {us[3] / us[0]:.2f} |" + "".join(f" {us[0] / u:.2f} |" for u in us[4:]))
        points += record_points(shape, causal, names, us, tf)
    if not args.record:
        return 0
    return bench_records.record_or_report(args.record, "op_backward", "bench_flash_bwd.py", points, commit)


def record_points(shape, causal, names, us, tf):
    """One point per backend; ours (all but the SDPA two) carry SDPA's times and the ratios to them."""
    sdpa = {"sdpa-flash": us[names.index("sdpa-flash")], "sdpa-cudnn": us[names.index("sdpa-cudnn")]}
    points = []
    for name, t, x in zip(names, us, tf):
        p = {"shape": label(shape), "mask": "causal" if causal else "full", "variant": name}
        if not math.isfinite(t):
            points.append(dict(p, skipped="refused the shape"))
            continue
        p.update(us=t, tflops=x)
        if name not in sdpa:
            for other, ot in sdpa.items():
                if math.isfinite(ot):
                    key = other.replace("-", "_")
                    p[key + "_us"], p["vs_" + key] = ot, ot / t
        points.append(p)
    return points


if __name__ == "__main__":
    sys.exit(main())
