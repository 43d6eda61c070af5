#!/usr/bin/env python3
"""Backward pass of attnprof's kernels against SDPA's backends (issue 13), op level.

One process: loads the build's libattnprof_core.so (torch.ops.attnprof.*) and
times back-to-back backward calls between CUDA events (median per call). Only
the backward is timed: the forward runs once, then each call is
torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True), for
custom-flash through its Autograd node (FlashAttentionFunction) and for every
SDPA backend pinned with sdpa_kernel; custom-flash (op) calls
attnprof::flash_attention_backward directly on the saved tensors. TFLOP/s use
the usual convention, backward = 2.5 x forward FLOPs (forward 4*B*H*S^2*D, half
of it causal). Also: custom-softmax against inplace (both through autograd,
matmul + softmax + matmul) at 4x16x4096x128 causal, one profiled backward of
each custom variant (autograd node names and kernels), and a short markdown
table last.

  python3 scripts/bench_backward.py [--lib build/libattnprof_core.so] [--iters 30]
  python3 scripts/bench_backward.py --variants DIR         # prebuilt attnprof_bwd_<name> libraries timed beside the build's kernel
"""
import argparse
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(8, 16, 1024, 64), (4, 16, 4096, 128), (1, 16, 16384, 128)]

# Names of the attnprof_bwd_<name> libraries --variants looks for.
VARIANTS = ["d64_8x1", "d64_n64", "d128_parts2", "base"]


def time_calls(fn, iters, warmup=3):
    """Median µs of one call over `iters` back-to-back calls, each between two events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def rel_err(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm()).item()


def sdpa_backends():
    from torch.nn.attention import SDPBackend
    return [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
            ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION)]


def bench_attention(shape, causal, iters, variant_ops, rows):
    from torch.nn.attention import sdpa_kernel
    b, h, s, d = shape
    fwd_flops = 4 * b * h * s * s * d / (2 if causal else 1)
    bwd_flops = 2.5 * fwd_flops
    scale = 1 / math.sqrt(d)
    opts = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(b, h, s, d, **opts, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, s, d, **opts)
    mask = "causal" if causal else "full"
    label = f"{b}x{h}x{s}x{d}"
    times = {}

    out, lse = torch.ops.attnprof.flash_attention(q, k, v, causal, scale)
    times["custom-flash"] = time_calls(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), iters)
    ours = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    saved = (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse)
    bwd_op = torch.ops.attnprof.flash_attention_backward
    times["custom-flash (op)"] = time_calls(lambda: bwd_op(*saved, causal, scale), iters)
    for name, op in variant_ops.items():
        if name.startswith("d") and not name.startswith(f"d{d}_"):  # changes the other head dim only
            continue
        try:
            grads = op(*saved, causal, scale)
            err = max(rel_err(x, y) for x, y in zip(grads, ours))
            times[f"custom-flash[{name}] (op)"] = time_calls(lambda: op(*saved, causal, scale), iters)
            print(f"  {label} {mask} variant {name}: max rel diff to the build's kernel {err:.1e}", flush=True)
        except RuntimeError as e:
            print(f"  {label} {mask} variant {name} failed: {str(e).splitlines()[0][:160]}", flush=True)
    del out, lse, saved

    ref = None
    for name, backend in sdpa_backends():
        try:
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                grads = torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
                times[name] = time_calls(lambda: torch.autograd.grad(o, (q, k, v), dout, retain_graph=True), iters)
            if name == "sdpa-flash":
                ref = grads
            del o, grads
        except RuntimeError as e:
            print(f"  {label} {mask} {name} unavailable: {str(e).splitlines()[0][:160]}", flush=True)
    if ref is not None:
        errs = ", ".join(f"d{n} {rel_err(x, y):.1e}" for n, x, y in zip("qkv", ours, ref))
        print(f"  {label} {mask} custom-flash vs sdpa-flash gradients (rel. Frobenius): {errs}", flush=True)
    for name, us in times.items():
        rows.append((label, mask, name, us, bwd_flops / us / 1e6, times["custom-flash"]))
        print(f"  {label} {mask:6s} {name:30s} {us:10.1f} us {bwd_flops / us / 1e6:7.1f} TFLOP/s", flush=True)
    del q, k, v, dout, ours
    torch.cuda.empty_cache()


def bench_softmax_pipelines(iters, rows):
    b, h, s, d = 4, 16, 4096, 128
    scale = 1 / math.sqrt(d)
    opts = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(b, h, s, d, **opts, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, s, d, **opts)
    mask = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1)

    def inplace():
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
        scores.masked_fill_(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, -1), v)

    def custom():
        return torch.matmul(torch.ops.attnprof.scaled_masked_softmax(torch.matmul(q, k.transpose(-2, -1)), scale, True), v)

    times = {}
    grads = {}
    for name, fn in (("inplace", inplace), ("custom-softmax", custom)):
        out = fn()
        grads[name] = torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        times[name] = time_calls(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), iters)
        del out
        torch.cuda.empty_cache()
    errs = ", ".join(f"d{n} {rel_err(x, y):.1e}" for n, x, y in zip("qkv", grads["custom-softmax"], grads["inplace"]))
    print(f"  custom-softmax vs inplace gradients (rel. Frobenius): {errs}", flush=True)
    bwd_flops = 2.5 * 4 * b * h * s * s * d / 2
    for name, us in times.items():
        rows.append((f"{b}x{h}x{s}x{d}", "causal", name, us, bwd_flops / us / 1e6, times["custom-softmax"]))
        print(f"  {b}x{h}x{s}x{d} causal {name:30s} {us:10.1f} us", flush=True)
    del q, k, v, dout, grads
    torch.cuda.empty_cache()


def profile_backward():
    """One profiled backward per custom variant: autograd nodes and GPU kernels, as the trace shows them."""
    from torch.profiler import ProfilerActivity, profile
    b, h, s, d = 2, 4, 1024, 64
    opts = dict(device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(b, h, s, d, **opts, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, h, s, d, **opts)
    scale = 1 / math.sqrt(d)
    variants = {
        "custom-flash": lambda: torch.ops.attnprof.flash_attention(q, k, v, True, scale)[0],
        "custom-softmax": lambda: torch.matmul(
            torch.ops.attnprof.scaled_masked_softmax(torch.matmul(q, k.transpose(-2, -1)), scale, True), v),
    }
    for name, fn in variants.items():
        out = fn()
        out.backward(dout, retain_graph=True)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            out.backward(dout, retain_graph=True)
            torch.cuda.synchronize()
        nodes = sorted({e.name for e in prof.events() if "evaluate_function" in e.name})
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        print(f"  profile {name} backward: autograd nodes {nodes}", flush=True)
        print(f"  profile {name} backward: {len(kernels)} GPU activities {[n[:80] for n in kernels]}", flush=True)
        del out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=str(ROOT / "build" / "libattnprof_core.so"))
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--variant-names", default=",".join(VARIANTS), help="comma list of " + ",".join(VARIANTS))
    ap.add_argument("--variants", metavar="DIR", help="load DIR/<name>/attnprof_bwd_<name>.so and time them too")
    ap.add_argument("--skip-big", action="store_true", help="skip 1x16x16384x128")
    ap.add_argument("--only-ours", metavar="B,HQ,HKV,SQ,SK,D[,causal]", action="append",
                    help="just run attnprof::flash_attention_backward 5 times at this shape, on random out "
                         "and lse = 0 (for ncu and compute-sanitizer; any GQA ratio or seq_q != seq_k)")
    args = ap.parse_args()
    names = [n for n in args.variant_names.split(",") if n]

    torch.ops.load_library(args.lib)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, lib {args.lib}", flush=True)
    variant_ops = {}
    if args.variants:
        for n in names:
            so = Path(args.variants) / n / f"attnprof_bwd_{n}.so"
            if so.exists():
                torch.ops.load_library(str(so))
                variant_ops[n] = getattr(torch.ops, f"attnprof_bwd_{n}").flash_attention_backward
    for shape in args.only_ours or []:
        fields = shape.split(",")
        b, hq, hkv, sq, sk, d = (int(x) for x in fields[:6])
        causal = fields[6:] == ["causal"]
        opts = dict(device="cuda", dtype=torch.bfloat16)
        q, out, dout = (torch.randn(b, hq, sq, d, **opts) for _ in range(3))
        k, v = (torch.randn(b, hkv, sk, d, **opts) for _ in range(2))
        lse = torch.zeros(b, hq, sq, device="cuda")
        for _ in range(5):
            torch.ops.attnprof.flash_attention_backward(dout, q, k, v, out, lse, causal, 1 / math.sqrt(d))
        torch.cuda.synchronize()
        print(f"ran flash_attention_backward 5x at {shape}", flush=True)
    if args.only_ours:
        return 0
    profile_backward()
    rows = []
    shapes = SHAPES[:2] if args.skip_big else SHAPES
    for shape in shapes:
        for causal in (True, False):
            bench_attention(shape, causal, args.iters if shape[2] <= 4096 else max(5, args.iters // 3),
                            variant_ops, rows)
    bench_softmax_pipelines(max(5, args.iters // 3), rows)

    print("\n| shape | mask | backward of | µs (median) | TFLOP/s | custom speed-up |")
    print("|---|---|---|---:|---:|---:|")
    for shape, mask, name, us, tflops, ours in rows:
        print(f"| {shape} | {mask} | {name} | {us:.1f} | {tflops:.0f} | {us / ours:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
