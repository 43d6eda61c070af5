#!/usr/bin/env python3
"""Time one attnprof operator from two builds of the library against each other, in one run.

Two libraries cannot share a Python process (both register the attnprof::
namespace), so each round runs one child process per library, in alternating
order (A B, then B A, ...), each timing the operator at every point with
scripts/bench_flash_sm90.py's time_fns (CUDA-event median of back-to-back
calls, input sets rotated, settling calls first). The figure per point is the
median over rounds; B / A is the ratio of B's time to A's (above 1: B slower).
This is how a kernel change whose SASS differs from the base commit's
(scripts/sass_diff.py) is re-benchmarked: A the base, B the work tree.

  python3 scripts/ab_ops.py --lib-a base/build/libattnprof_core.so --lib-b build/libattnprof_core.so \\
      --op flash_attention_backward [--shapes 8x16x1024x64,4x16x4096x128] [--masks causal,full]
      [--dtype bf16] [--rounds 4] [--calls 10] [--reps 10] [--tolerance 0.02]
      [--config-a NAME] [--config-b NAME]

--op: flash_attention, flash_attention_sm90 (forwards), flash_attention_backward,
flash_attention_backward_sm90 (backwards, on the saved forward of
flash_attention). Prints a Markdown table; exits 1 when some point's ratio is
outside 1 ± tolerance, 77 without a GPU. --config-a/--config-b time a Hopper
operator's named configuration instead (the by-name operators,
flash_attention_sm90_config and flash_attention_backward_sm90_config); with
one library for both sides this times an alternative against the default.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FORWARDS = ("flash_attention", "flash_attention_sm90")
BACKWARDS = ("flash_attention_backward", "flash_attention_backward_sm90")


def child(args):
    import torch
    sys.path.insert(0, HERE)
    from bench_flash_sm90 import time_fns
    torch.ops.load_library(args.lib)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    op = getattr(torch.ops.attnprof, args.op + ("_config" if args.config else ""))
    results = {}
    for shape in args.shapes.split(","):
        b, h, s, d = (int(x) for x in shape.split("x"))
        for mask in args.masks.split(","):
            causal = mask == "causal"
            scale = d ** -0.5
            sets = []
            for _ in range(args.sets):
                q, k, v, dout = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(4))
                if args.op in BACKWARDS:
                    out, lse = torch.ops.attnprof.flash_attention(q, k, v, causal, scale)
                    sets.append((dout, q, k, v, out, lse))
                else:
                    sets.append((q, k, v))
            fn = ((lambda *t: op(*t, causal, scale, args.config)) if args.config
                  else (lambda *t: op(*t, causal, scale)))
            [us] = time_fns([fn], sets, args.calls, args.reps, args.settle)
            results[f"{shape} {mask}"] = us
            del sets
            torch.cuda.empty_cache()
    print("RESULT " + json.dumps(results), flush=True)


def run_child(lib, config, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--lib", lib, "--op", args.op,
           *(["--config", config] if config else []),
           "--shapes", args.shapes, "--masks", args.masks, "--dtype", args.dtype, "--calls", str(args.calls),
           "--reps", str(args.reps), "--settle", str(args.settle), "--sets", str(args.sets)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise SystemExit(f"the child for {lib} failed (exit {p.returncode}): {p.stderr.strip()[-800:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--config-a", help="time side A's named configuration (Hopper operators only)")
    ap.add_argument("--config-b", help="time side B's named configuration (Hopper operators only)")
    ap.add_argument("--lib-a", help="the base build's libattnprof_core.so")
    ap.add_argument("--lib-b", help="the work tree build's libattnprof_core.so")
    ap.add_argument("--op", required=True, choices=FORWARDS + BACKWARDS)
    ap.add_argument("--shapes", default="8x16x1024x64,4x16x4096x128")
    ap.add_argument("--masks", default="causal,full")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--settle", type=int, default=10)
    ap.add_argument("--sets", type=int, default=2, help="input sets rotated between calls")
    ap.add_argument("--tolerance", type=float, default=0.02)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    if not (args.lib_a and args.lib_b):
        ap.error("--lib-a and --lib-b are required")
    if (args.config_a or args.config_b) and not args.op.endswith("_sm90"):
        ap.error(f"--config-a/--config-b name a Hopper configuration; --op {args.op} has none "
                 "(flash_attention_sm90, flash_attention_backward_sm90)")
    try:
        import torch
        if not torch.cuda.is_available():
            print("SKIP: no CUDA device")
            return 77
    except ImportError:
        print("SKIP: no torch")
        return 77
    times = {"A": [], "B": []}
    for r in range(args.rounds):
        for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
            times[side].append(run_child(args.lib_a if side == "A" else args.lib_b,
                                         args.config_a if side == "A" else args.config_b, args))
    points = list(times["A"][0])
    label = lambda lib, cfg: lib + (f" {cfg}" if cfg else "")
    print(f"{args.op}, {args.dtype}, median over {args.rounds} rounds "
          f"(A {label(args.lib_a, args.config_a)}, B {label(args.lib_b, args.config_b)})\n")
    print("| point | A us | B us | B / A | rounds' B / A |")
    print("|---|---:|---:|---:|---|")
    worst = 0.0
    for pt in points:
        a = statistics.median(t[pt] for t in times["A"])
        b = statistics.median(t[pt] for t in times["B"])
        per_round = " ".join(f"{tb[pt] / ta[pt]:.3f}" for ta, tb in zip(times["A"], times["B"]))
        ratio = b / a if a > 0 else math.nan
        worst = max(worst, abs(ratio - 1) if not math.isnan(ratio) else math.inf)
        print(f"| {pt} | {a:.1f} | {b:.1f} | {ratio:.3f} | {per_round} |")
    ok = worst <= args.tolerance
    print(f"\n{'within' if ok else 'OUTSIDE'} {args.tolerance:.0%} at every point (worst {worst:.1%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
