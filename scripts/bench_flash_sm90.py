#!/usr/bin/env python3
"""Op-level timing of attnprof::flash_attention_sm90 against SDPA pinned to cuDNN
and to FlashAttention-2, in one Python process (fast iteration on the Hopper kernel).

Each figure is the median over --reps repetitions of --calls back-to-back calls
between two CUDA events (launch latency hides behind the GPU, as in a model),
the repetitions of all backends interleaved in a random order, each preceded by untimed calls of its own;
when one set of q/k/v fits in L2 several sets are rotated so every call reads
from HBM. TFLOP/s count 4*B*H*S^2*D, half for causal. The ratio to cuDNN is last.

  python3 scripts/bench_flash_sm90.py [--lib build/libattnprof_core.so] [--check]
  python3 scripts/bench_flash_sm90.py --profile 4x16x4096x128 [--causal]   # one call, for ncu
    (with --fp8 the e4m3 operator; with --fp8-configs too, the first of them by name)
  --sustain SECONDS: instead, each backend alone for SECONDS of back-to-back calls per repetition,
    timed over the second half (the clock settled under the power cap), with the SM clock and
    power nvidia-smi reads meanwhile: how the kernels compare in a long run of one of them
  --record DIR [--commit SHA]: also add the table to DIR/op_forward.json (op_forward_sustained.json
    with --sustain), the records BENCHMARKS.md is made from (scripts/bench_records.py)
  --fp8: attnprof::flash_attention_sm90_fp8 on the same draws quantised to e4m3 (per-head scales)
    beside the bf16 kernel and cuDNN (bf16), head_dim 128 shapes; adds the fp8 / bf16-kernel ratio
    (issue 32's target); with --check, the fp8 errors against float64 and a plain FP8 implementation;
    --fp8-configs A,B: also fp8 configurations by name (alternatives built with -DATTNPROF_KERNEL_CONFIGS)
  --fp8-decode: causal decode shapes (GQA, 1-4 queries against 4096-131072 keys) at head_dim 128 and 64: the
    fp8 operator (its decode route) against the bf16 operator and the fp8 Hopper kernel by name, K+V read
    bandwidth against a device copy timed in the same run, the fp8 error against float64 beside plain FP8's
"""
import argparse
import math
import re
import random
import statistics
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_records  # noqa: E402
from bench_kernels import copy_ceiling_gbs  # noqa: E402
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(8, 16, 1024, 64), (4, 16, 4096, 128), (4, 16, 8192, 128), (1, 16, 16384, 128)]


def parse_shape(s):
    """BxHxSxD, four positive integers (an argparse type: a bad value is a one-line usage error)."""
    try:
        shape = tuple(int(x) for x in s.split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"{s!r} is not BxHxSxD (four positive integers, e.g. 8x16x1024x64)")
    return shape


def parse_shapes(s):
    """Comma-separated BxHxSxD."""
    return [parse_shape(x) for x in s.split(",")]


def require_cuda(ap):
    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU (torch.cuda.is_available() is False here)")


def flops(shape, causal):
    b, h, s, d = shape
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


def make_inputs(shape, dtype, sets):
    b, h, s, d = shape
    return [tuple(torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3)) for _ in range(sets)]


def timing_inputs(shape, prop):
    """bf16 q/k/v sets for timing `shape`: enough sets (up to 8) that together
    they are 3x the L2, so every call reads from HBM."""
    set_bytes = 3 * math.prod(shape) * 2
    return make_inputs(shape, torch.bfloat16, max(1, min(8, math.ceil(3 * prop.L2_cache_size / set_bytes))))


def time_fns(fns, inputs, calls, reps, settle):
    """Median µs per call of each fn. The repetitions of all fns interleave in
    a fresh random order each repetition, and before its timed calls each fn
    runs `settle` untimed calls of its own. Both against biases measured on
    the H200 (2026-11-30 and 12-01): with a fixed order the same kernel timed
    first ran 5-10% faster than when timed fourth; with a rotating order a
    kernel that always followed sdpa-flash (a cooler kernel) ran up to 10%
    faster than the very same kernel built as a second library and timed
    right after it: the clock the GPU settles at depends on the power drawn
    just before. A fn that raises (a backend refusing the shape) gets NaN."""
    live = []
    for fn in fns:
        try:
            for i in range(3):  # warm-up (and cuDNN's plan build)
                fn(*inputs[i % len(inputs)])
            live.append(fn)
        except RuntimeError as e:
            print(f"  refused: {str(e).splitlines()[0]}")
            live.append(None)
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    order = random.Random(12345)
    for rep in range(reps):
        for j in order.sample(range(len(live)), len(live)):
            fn = live[j]
            if fn is None:
                continue
            for i in range(settle):
                fn(*inputs[i % len(inputs)])
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(calls):
                fn(*inputs[i % len(inputs)])
            end.record()
            end.synchronize()
            times[j].append(start.elapsed_time(end) * 1e3 / calls)
    return [statistics.median(t) if t else float("nan") for t in times]


def smi_sample():
    """(SM clock MHz, instant power W) from nvidia-smi, or None where it cannot say."""
    try:
        out = subprocess.run(["nvidia-smi", "--id=0", "--query-gpu=clocks.sm,power.draw.instant",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10).stdout
        clock, power = (float(x) for x in out.strip().splitlines()[0].split(","))
        return clock, power
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def time_sustained(fns, inputs, seconds, reps):
    """Per fn, medians over reps of (µs per call, SM clock, power): each rep runs
    every fn in a fresh random order, alone for `seconds` of back-to-back calls,
    and times the second half, during which nvidia-smi is asked once (the GPU
    is still busy with the calls queued before). A run of interleaved short
    bursts (time_fns) shares one power state among the kernels; here each
    kernel sets its own, as in a long run of one model."""
    counts = []
    for fn in fns:
        for i in range(3):
            fn(*inputs[i % len(inputs)])
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(10):
            fn(*inputs[i % len(inputs)])
        end.record()
        end.synchronize()
        per_call_s = start.elapsed_time(end) / 1e3 / 10
        counts.append(max(20, int(seconds / per_call_s) // 2 * 2))
    results = [[] for _ in fns]
    order = random.Random(4321)
    for _ in range(reps):
        for j in order.sample(range(len(fns)), len(fns)):
            fn, n = fns[j], counts[j]
            for i in range(n // 2):
                fn(*inputs[i % len(inputs)])
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(n // 2):
                fn(*inputs[i % len(inputs)])
            end.record()
            sample = smi_sample()
            end.synchronize()
            results[j].append((start.elapsed_time(end) * 1e3 / (n // 2),) + (sample or (math.nan, math.nan)))
    return [tuple(statistics.median(r[i] for r in rs) for i in range(3)) for rs in results]


def quantize_e4m3(x):
    """x [B, H, S, D] to e4m3 with one scale per (b, h) from its amax (mapped to 448), as
    attnprof's --dtype fp8 does (variants/fp8.cpp): (values, float32 descale [B, H])."""
    amax = x.float().abs().amax(dim=(2, 3))
    descale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax)).contiguous()
    return (x.float() / descale[..., None, None]).clamp(-448, 448).to(torch.float8_e4m3fn), descale


def fp8_set(q, k, v):
    """One bf16 input set and its e4m3 quantisation: (q, k, v, q8, k8, v8, q_descale, k_descale, v_descale)."""
    (q8, qd), (k8, kd), (v8, vd) = quantize_e4m3(q), quantize_e4m3(k), quantize_e4m3(v)
    return (q, k, v, q8, k8, v8, qd, kd, vd)


def fp8_op(config=None):
    """(q8, k8, v8, qd, kd, vd, causal, scale) -> (out, lse): the fp8 operator, or with `config` its
    by-name form running that fp8 configuration."""
    if config is None:
        return torch.ops.attnprof.flash_attention_sm90_fp8
    named = torch.ops.attnprof.flash_attention_sm90_fp8_config
    return lambda *a: named(*a, config)


def fp8_head_dim(config=None):
    """The head dim an fp8 configuration runs (its name says it: sm90_fwd_hdim<D>_...); 128 for the operator's
    own choice."""
    m = re.match(r"sm90_fwd_hdim(\d+)_", config or "")
    return int(m.group(1)) if m else 128


def ours_fp8(causal, scale, config=None):
    op = fp8_op(config)
    return lambda q, k, v, q8, k8, v8, qd, kd, vd: op(q8, k8, v8, qd, kd, vd, causal, scale)[0]


def bf16_of(fn):
    """A bf16 fn taking an fp8_set (its first three tensors)."""
    return lambda *t: fn(t[0], t[1], t[2])


def plain_fp8(q8, k8, v8, qd, kd, vd, causal, scale):
    """The plain FP8 implementation attnprof holds fp8 kernels to (variants/fp8.cpp): float32 scores of
    the dequantised q, k; P scaled by 256, rounded to e4m3, times V's e4m3 values; the float32 row sum
    and v's descale applied after."""
    group = q8.shape[1] // k8.shape[1]
    q = q8.float() * qd[..., None, None]
    k = (k8.float() * kd[..., None, None]).repeat_interleave(group, 1)
    v8f = v8.float().repeat_interleave(group, 1)
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(sk - sq + 1), -math.inf)
    m = s.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
    prob = torch.exp(s - m)
    l = prob.sum(-1, keepdim=True)
    p8 = (prob * 256).to(torch.float8_e4m3fn).float()
    out = (p8 @ v8f) * vd.repeat_interleave(group, 1)[..., None, None] / (l * 256)
    return torch.where(l > 0, out, torch.zeros_like(out))


def fp8_errors(out, q8, k8, v8, qd, kd, vd, causal, scale):
    """(out's relative Frobenius error, the plain FP8 implementation's, the reference lse), both errors against
    float64 attention of the dequantised inputs: attnprof's pass rule holds the first to twice the second."""
    deq = [x.float() * s_[..., None, None] for x, s_ in ((q8, qd), (k8, kd), (v8, vd))]
    ref, lse_ref = reference(*deq, causal, scale)
    plain = plain_fp8(q8, k8, v8, qd, kd, vd, causal, scale)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    perr = ((plain.double() - ref).norm() / ref.norm()).item()
    return err, perr, lse_ref


def fp8_lse_bound(lse_ref, q8, k8, qd, kd, scale):
    """The lse bound of tests/test_flash_sm90_fp8.cpp for a kernel that normalises by its e4m3 sums, with the
    widest P (kPBits: each P within 8% of exp2): 1e-3 (1 + max |lse|), the FP8 wgmma's accumulation (head_dim / 32
    k steps losing 2^-13 of the products' magnitude) and the e4m3 sums' share."""
    group = q8.shape[1] // k8.shape[1]
    qa = (q8.float() * qd[..., None, None]).abs()
    ka = (k8.float() * kd[..., None, None]).abs().repeat_interleave(group, 1)
    accumulation = q8.shape[-1] / 32 * 2.0 ** -13 * (qa @ ka.transpose(-2, -1)).max().item() * scale
    share = 0.08 + 2.0 ** -10 + k8.shape[2] * 2.0 ** -10 / 256
    fin = torch.isfinite(lse_ref)
    lse_max = lse_ref[fin].abs().max().item() if fin.any() else 0.0
    return 1e-3 * (1 + lse_max) + accumulation - math.log1p(-share)


def check_fp8(config=None):
    """fp8 errors against float64 of the dequantised inputs, beside the plain FP8 implementation's
    (attnprof's pass rule: at most twice it), and the lse against the tests' bound (fp8_lse_bound); of the
    operator's configuration or `config`."""
    print(f"check fp8{' ' + config if config else ''}: case | out rel err | plain fp8 rel err | lse max abs err "
          "| its bound")
    op = fp8_op(config)
    d = fp8_head_dim(config)
    ok = True
    for (b, hq, sq), (hkv, sk) in [((1, 1, 128), (1, 128)), ((1, 2, 300), (2, 300)), ((2, 4, 1000), (2, 1000)),
                                   ((1, 8, 4096), (2, 4096)), ((1, 4, 17), (1, 1000)), ((1, 2, 77), (1, 33))]:
        for causal in (False, True):
            t = [torch.randn(b, hq if i == 0 else hkv, sq if i == 0 else sk, d, device="cuda", dtype=torch.bfloat16)
                 for i in range(3)]
            _, _, _, q8, k8, v8, qd, kd, vd = fp8_set(*t)
            scale = d ** -0.5
            out, lse = op(q8, k8, v8, qd, kd, vd, causal, scale)
            err, perr, lse_ref = fp8_errors(out, q8, k8, v8, qd, kd, vd, causal, scale)
            fin = torch.isfinite(lse_ref)
            lerr = (lse.double()[fin] - lse_ref[fin]).abs().max().item() if fin.any() else 0.0
            bound = fp8_lse_bound(lse_ref, q8, k8, qd, kd, scale)
            good = math.isfinite(err) and err <= 2 * perr + 1e-6 and lerr <= bound
            ok &= good
            print(f"  {b}x{hq}x{sq}x{d} kv {hkv}x{sk} {'causal' if causal else 'full'}"
                  f" | {err:.2e} | {perr:.2e} | {lerr:.2e} | {bound:.2e} {'ok' if good else 'FAIL'}")
    return ok


def ours(op_ns, causal, scale):
    op = getattr(torch.ops, op_ns).flash_attention_sm90
    return lambda q, k, v: op(q, k, v, causal, scale)[0]


def sdpa(backend, causal, scale):
    def run(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return run


def reference(q, k, v, causal, scale):
    """float64 output and log-sum-exp (bottom-right causal, GQA by repetition)."""
    group = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), k.double().repeat_interleave(group, 1), v.double().repeat_interleave(group, 1)
    s = qd @ kd.transpose(-2, -1) * scale
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(sk - sq + 1), -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ vd, lse


def check(op_ns):
    """Errors of a few cases, apart: lse depends on Q·Kᵀ only (TMA of Q/K, the
    K-major wgmma, masking, softmax), out also on P·V (V's MN-major descriptor,
    the P register fragments)."""
    print("check: case | out rel err | plain bf16 rel err | lse max abs err")
    op = getattr(torch.ops, op_ns).flash_attention_sm90
    ok = True
    cases = [((1, 1, 64, 64), (1, 64)), ((1, 1, 128, 128), (1, 128)), ((1, 2, 300, 64), (2, 300)),
             ((2, 4, 1000, 128), (2, 1000)), ((1, 8, 4096, 128), (2, 4096)), ((1, 4, 17, 64), (1, 1000))]
    for (b, hq, sq, d), (hkv, sk) in cases:
        for dtype in (torch.bfloat16, torch.float16):
            for causal in (False, True):
                q = torch.randn(b, hq, sq, d, device="cuda", dtype=dtype)
                k = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
                v = torch.randn(b, hkv, sk, d, device="cuda", dtype=dtype)
                scale = d ** -0.5
                out, lse = op(q, k, v, causal, scale)
                torch.cuda.synchronize()
                ref, lse_ref = reference(q, k, v, causal, scale)
                plain = F.scaled_dot_product_attention(q, k.repeat_interleave(hq // hkv, 1),
                                                       v.repeat_interleave(hq // hkv, 1),
                                                       attn_mask=None if not causal else torch.ones(
                                                           sq, sk, dtype=torch.bool, device="cuda").tril(sk - sq),
                                                       scale=scale).nan_to_num(0.0)
                err = ((out.double() - ref).norm() / ref.norm()).item()
                perr = ((plain.double() - ref).norm() / ref.norm()).item()
                fin = torch.isfinite(lse_ref)
                lerr = (lse.double()[fin] - lse_ref[fin]).abs().max().item() if fin.any() else 0.0
                good = math.isfinite(err) and err <= max(2 * perr, 1e-6) + 1e-6 and lerr < 1e-2
                ok &= good
                print(f"  {b}x{hq}x{sq}x{d} kv {hkv}x{sk} {str(dtype)[6:]} {'causal' if causal else 'full'}"
                      f" | {err:.2e} | {perr:.2e} | {lerr:.2e} {'ok' if good else 'FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libattnprof_core.so")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--settle", type=int, default=20, help="untimed calls of a fn just before its timed ones")
    ap.add_argument("--check", action="store_true", help="print error diagnostics first")
    ap.add_argument("--profile", type=parse_shape, help="BxHxSxD: run the op once after warm-up (for ncu) and exit")
    ap.add_argument("--causal", action="store_true", help="with --profile")
    ap.add_argument("--shapes", type=parse_shapes, help="comma-separated BxHxSxD (default: the four benchmark shapes)")
    ap.add_argument("--fp8", action="store_true",
                    help="time the fp8 (e4m3) kernel beside the bf16 one and cuDNN (head_dim 128 shapes)")
    ap.add_argument("--fp8-configs", type=lambda t: [c for c in t.split(",") if c], default=[],
                    help="with --fp8: also time these fp8 configurations by name (flash_attention_sm90_fp8_configs() "
                         "lists this build's), each as a column with its ratio to the operator's")
    ap.add_argument("--fp8-decode", action="store_true",
                    help="time the fp8 operator's decode route against the bf16 operator and the fp8 Hopper kernel")
    ap.add_argument("--sustain", type=float, metavar="SECONDS",
                    help="time each backend alone for SECONDS per repetition (see above); --reps repetitions")
    bench_records.add_record_flags(ap)
    args = ap.parse_args()
    if args.fp8_configs and not args.fp8:
        ap.error("--fp8-configs times fp8 configurations: it needs --fp8")
    if args.fp8 and args.sustain is not None:
        ap.error("--fp8 times back-to-back calls; it does not take --sustain")
    if args.sustain is not None and not 0 < args.sustain <= 60:
        ap.error(f"--sustain {args.sustain}: expected seconds in (0, 60]")
    if args.fp8_decode and (args.fp8 or args.sustain is not None or args.profile or args.shapes):
        ap.error("--fp8-decode times its own decode shapes; it takes none of --fp8, --sustain, --profile, --shapes")
    if args.reps < 1:
        ap.error(f"--reps {args.reps}: expected at least 1")
    require_cuda(ap)
    commit = bench_records.commit_for(ap, args)

    torch.ops.load_library(args.lib)
    ops = [("attnprof", "sm90")]
    prop = torch.cuda.get_device_properties(0)
    print(f"device: {prop.name}, {prop.multi_processor_count} SMs, L2 {prop.L2_cache_size >> 20} MiB, torch {torch.__version__}")

    if args.fp8:
        built = list(torch.ops.attnprof.flash_attention_sm90_fp8_configs())
        for c in args.fp8_configs:
            if c not in built:
                ap.error(f"--fp8-configs {c}: not in this build (built: {', '.join(built)}; alternatives are built "
                         "with -DATTNPROF_KERNEL_CONFIGS)")

    if args.profile:
        shape = args.profile
        inputs = fp8_set(*make_inputs(shape, torch.bfloat16, 1)[0])
        # With --fp8-configs, the first of them by name (an alternative's profile beside the operator's).
        config = args.fp8_configs[0] if args.fp8_configs else None
        fn = ours_fp8(args.causal, shape[3] ** -0.5, config) if args.fp8 else bf16_of(ours("attnprof", args.causal, shape[3] ** -0.5))
        for _ in range(3):
            fn(*inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profiled")
        fn(*inputs)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        return 0

    if args.fp8_decode:
        return fp8_decode_table(args)
    if args.fp8:
        if args.check:
            for c in [None] + args.fp8_configs:
                if not check_fp8(c):
                    print(f"check FAILED for fp8{' ' + c if c else ''} (timings follow anyway)")
        return fp8_table(args, prop, commit)
    if args.check:
        for ns, label in ops:
            print(f"[{label}]")
            if not check(ns):
                print(f"check FAILED for {label} (timings follow anyway)")

    shapes = args.shapes or SHAPES
    if args.sustain is not None:
        points = sustained(ops, shapes, args.sustain, args.reps, prop)
        return record("op_forward_sustained", points, args, commit)
    names = [label for _, label in ops] + ["cudnn", "flash"]
    rows, points = [], []
    for shape in shapes:
        inputs = timing_inputs(shape, prop)
        for causal in (True, False):
            scale = shape[3] ** -0.5
            fns = [ours(ns, causal, scale) for ns, _ in ops]
            fns += [sdpa(SDPBackend.CUDNN_ATTENTION, causal, scale), sdpa(SDPBackend.FLASH_ATTENTION, causal, scale)]
            us = time_fns(fns, inputs, args.calls, args.reps, args.settle)
            tf = [flops(shape, causal) / (t * 1e-6) / 1e12 for t in us]
            rows.append((shape, causal, tf))
            points += [op_point(shape, causal, n, t, us[names.index("cudnn")]) for n, t in zip(names, us)]
        del inputs
        torch.cuda.empty_cache()

    cudnn = names.index("cudnn")
    head = "| shape | mask | " + " | ".join(f"{n} TFLOP/s" for n in names) + " | " + \
           " | ".join(f"{n} / cudnn" for n in names if n not in ("cudnn", "flash")) + " |"
    print(head)
    print("|" + "---|" * (2 + len(names) + len(ops)))
    for shape, causal, tf in rows:
        ratios = [f"{t / tf[cudnn]:.2f}" for t in tf[:len(ops)]]
        print(f"| {'x'.join(map(str, shape))} | {'causal' if causal else 'full'} | " +
              " | ".join(f"{t:.0f}" for t in tf) + " | " + " | ".join(ratios) + " |")
    return record("op_forward", points, args, commit)


# Issue 30's decode points and two beside them: (batch, q heads, kv heads, seq_q, seq_kv).
DECODE_SHAPES = bench_records.DECODE_SHAPES + [(16, 32, 8, 1, 8192), (4, 64, 8, 2, 16384)]


def fp8_decode_table(args):
    """--fp8-decode: per decode shape and head dim, the fp8 operator, the bf16 operator and the fp8 operator's
    Hopper kernel by name (its configuration at that head dim), interleaved; K+V bytes over each median
    against a copy; the fp8 operator's error on the first two sequences against float64 and plain FP8."""
    names = list(torch.ops.attnprof.flash_attention_sm90_fp8_configs())
    ceiling = copy_ceiling_gbs()
    print(f"copy ceiling {ceiling:.0f} GB/s")
    print("| shape (causal) | fp8 route µs | bf16 operator µs | fp8 Hopper kernel µs | vs bf16 | vs Hopper kernel | "
          "K+V % of copy (fp8 / bf16) | error (plain FP8) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    ok = True
    for d in (128, 64):
        hopper = next((n for n in names if n.startswith(f"sm90_fwd_hdim{d}_")), None)
        for b, hq, hkv, sq, skv in DECODE_SHAPES:
            scale = d ** -0.5
            kv_bytes = 2 * b * hkv * skv * d  # K and V, one byte a value
            sets = [fp8_set(*(torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
                              for h, s in ((hq, sq), (hkv, skv), (hkv, skv))))
                    for _ in range(max(1, min(6, math.ceil(150e6 / (2 * kv_bytes)))))]
            fns = [ours_fp8(True, scale), bf16_of(ours("attnprof", True, scale))]
            if hopper:
                fns.append(ours_fp8(True, scale, hopper))
            us = time_fns(fns, sets, args.calls, args.reps, 3) + ([] if hopper else [math.nan])
            q8, k8, v8, qd, kd, vd = (t[:2] for t in sets[0][3:])
            out = fp8_op()(q8, k8, v8, qd, kd, vd, True, scale)[0]
            err, perr, _ = fp8_errors(out, q8, k8, v8, qd, kd, vd, True, scale)
            ok &= err <= 2 * perr
            pct = [100 * n * kv_bytes / (t * 1e-6) / 1e9 / ceiling for n, t in ((1, us[0]), (2, us[1]))]
            by_name = (f"{us[2]:.1f}", f"{us[2] / us[0]:.2f}x") if hopper else ("—", "—")
            print(f"| {b}x{hq}/{hkv}x{sq}/{skv}x{d} | {us[0]:.1f} | {us[1]:.1f} | {by_name[0]} | {us[1] / us[0]:.2f}x | "
                  f"{by_name[1]} | {pct[0]:.0f} / {pct[1]:.0f} | {err:.2g} ({perr:.2g}){'' if err <= 2 * perr else ' FAIL'} |")
            del sets
            torch.cuda.empty_cache()
    return 0 if ok else 1


def fp8_table(args, prop, commit):
    """sm90 (bf16), sm90 fp8 and cuDNN (bf16) on the same draws, interleaved; fp8 / bf16 kernel is the
    ratio issue 32 sets targets on (1.5x at 1x16x16384x128 and 4x16x8192x128, 1.3x at 4x16x4096x128)."""
    shapes = args.shapes or [s for s in SHAPES if s[3] == 128]
    configs = args.fp8_configs
    names = ["sm90", "sm90 fp8", "cudnn"] + [f"sm90 fp8 {c}" for c in configs]
    print("| shape | mask | sm90 TFLOP/s | sm90 fp8 TFLOP/s | cudnn TFLOP/s | fp8 / bf16 kernel | fp8 / cudnn |" +
          "".join(f" {c} TFLOP/s | {c} / fp8 |" for c in configs))
    print("|---|---|---:|---:|---:|---:|---:|" + "---:|---:|" * len(configs))
    points = []
    for shape in shapes:
        inputs = [fp8_set(*t) for t in timing_inputs(shape, prop)]
        for causal in (True, False):
            scale = shape[3] ** -0.5
            fns = [bf16_of(ours("attnprof", causal, scale)), ours_fp8(causal, scale),
                   bf16_of(sdpa(SDPBackend.CUDNN_ATTENTION, causal, scale))] + [
                ours_fp8(causal, scale, c) for c in configs]
            us = time_fns(fns, inputs, args.calls, args.reps, args.settle)
            tf = [flops(shape, causal) / (t * 1e-6) / 1e12 for t in us]
            print(f"| {'x'.join(map(str, shape))} | {'causal' if causal else 'full'} | " +
                  " | ".join(f"{t:.0f}" for t in tf[:3]) + f" | {us[0] / us[1]:.2f} | {us[2] / us[1]:.2f} |" +
                  "".join(f" {t:.0f} | {us[1] / u:.2f} |" for t, u in zip(tf[3:], us[3:])), flush=True)
            for n, t in zip(names, us):
                extra = {"vs_sm90_bf16": us[0] / t} if n.startswith("sm90 fp8") else {}
                points.append(op_point(shape, causal, n, t, us[2], **extra))
        del inputs
        torch.cuda.empty_cache()
    return record("op_forward", points, args, commit)


def op_point(shape, causal, name, us, cudnn_us, **extra):
    """One backend's figures at one point, as a record keeps them (NaN: the backend refused the shape)."""
    p = {"shape": "x".join(map(str, shape)), "mask": "causal" if causal else "full", "variant": name}
    if math.isfinite(us):
        p.update(us=us, tflops=flops(shape, causal) / (us * 1e-6) / 1e12)
        if name != "cudnn" and math.isfinite(cudnn_us):
            p["vs"] = cudnn_us / us
    else:
        p["skipped"] = "refused the shape"
    return dict(p, **{k: v for k, v in extra.items() if math.isfinite(v)})


def record(suite, points, args, commit):
    """With --record: the table's points as one run of `suite`; 0, or 2 when the record cannot be written."""
    if not args.record:
        return 0
    return bench_records.record_or_report(args.record, suite, "bench_flash_sm90.py", points, commit)


def sustained(ops, shapes, seconds, reps, prop):
    names = [label for _, label in ops] + ["cudnn"]
    print(f"sustained: each backend alone for {seconds:g} s per repetition, {reps} repetitions, "
          "timed over the second half; medians")
    print("| shape | mask | backend | µs per call | TFLOP/s | SM clock MHz | power W | / cudnn |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    points = []
    for shape in shapes:
        inputs = timing_inputs(shape, prop)
        for causal in (False, True):
            scale = shape[3] ** -0.5
            fns = [ours(ns, causal, scale) for ns, _ in ops] + [sdpa(SDPBackend.CUDNN_ATTENTION, causal, scale)]
            res = time_sustained(fns, inputs, seconds, reps)
            base = res[-1][0]
            for name, (us, clock, power) in zip(names, res):
                print(f"| {'x'.join(map(str, shape))} | {'causal' if causal else 'full'} | {name} | {us:.1f} | "
                      f"{flops(shape, causal) / (us * 1e-6) / 1e12:.0f} | {clock:.0f} | {power:.0f} | "
                      f"{base / us:.2f} |", flush=True)
                points.append(op_point(shape, causal, name, us, base, clock_mhz=clock, power_w=power))
        del inputs
        torch.cuda.empty_cache()
    return points


if __name__ == "__main__":
    sys.exit(main())
