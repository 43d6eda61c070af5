#!/usr/bin/env python3
"""Time our CUDA kernels against every SDPA backend through attnprof itself.

Each point runs `attnprof --variant V ... --timing-iters N`, whose summary holds the
unprofiled CUDA-event median (back-to-back forwards, input sets rotated when they
fit in L2). Prints TFLOP/s (4*B*H*S^2*D, half for causal) and the ratio to the
fastest SDPA backend at that point; the score-matrix pipelines (inplace,
custom-softmax) are compared with inplace. Run after the build (scripts/gpu_check.sh).

  python3 scripts/bench_kernels.py [--attnprof build/attnprof] [--iters 100] [--markdown out.md]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SDPA = ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient"]
SHAPES = [(8, 16, 1024, 64), (4, 16, 4096, 128), (4, 16, 8192, 128), (1, 16, 16384, 128)]
CUSTOM = ["custom-flash", "custom-flash-sm90"]


def run_point(exe, variant, shape, causal, iters, out):
    b, h, s, d = shape
    cmd = [exe, "--variant", variant, "--batch", str(b), "--heads", str(h), "--seq", str(s), "--head-dim", str(d),
           "--dtype", "bf16", "--timing-iters", str(iters), "--out", out, "--row-limit", "1",
           "--causal" if causal else "--no-causal"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    with open(os.path.join(out, variant, f"{b}_{h}_{s}_{d}_bf16.summary.json")) as fh:
        summ = json.load(fh)
    return summ["headline"]["gpu_time_median_us"], summ["problem"]["flops"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnprof", default="build/attnprof")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--markdown")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnprof_bench_") as out:
        for shape in SHAPES:
            for causal in (True, False):
                times = {}
                for v in SDPA + CUSTOM:
                    t, flops = run_point(args.attnprof, v, shape, causal, args.iters, out)
                    times[v] = (t, flops)
                best = min((t for v, (t, _) in times.items() if v in SDPA and t), default=None)
                for v, (t, flops) in times.items():
                    if t is None:
                        rows.append((shape, causal, v, "skipped", "", "", flops))
                        continue
                    rows.append((shape, causal, v, f"{t:.1f}", f"{flops / (t * 1e-6) / 1e12:.1f}",
                                 f"{best / t:.2f}" if best else "", ""))
        shape = (4, 16, 4096, 128)
        base = None
        for v in ["inplace", "custom-softmax"]:
            t, flops = run_point(args.attnprof, v, shape, True, max(10, args.iters // 10), out)
            if t is None:
                rows.append((shape, True, v, "skipped", "", "", flops))
                continue
            base = base or t
            rows.append((shape, True, v, f"{t:.1f}", f"{flops / (t * 1e-6) / 1e12:.1f}", f"{base / t:.2f} vs inplace", ""))
    head = "| shape | mask | variant | GPU time median (µs) | TFLOP/s | vs fastest SDPA |\n|---|---|---|---|---|---|"
    lines = [head] + [f"| {'x'.join(map(str, r[0]))} | {'causal' if r[1] else 'full'} | {r[2]} | {r[3]} | {r[4]} | "
                      f"{r[5] if r[3] != 'skipped' else r[6]} |" for r in rows]
    text = "\n".join(lines)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
