#!/usr/bin/env python3
"""Show that attnprof's NVTX ranges are real: Nsight Compute, filtered to the
`attn_fwd` ranges, must capture exactly the kernels attnprof's profiler counts.

  python3 scripts/nvtx_proof.py [--attnprof build/attnprof] [--variants naive,sdpa-flash,...]

For each variant it runs
  ncu --nvtx --nvtx-include <filter> --clock-control none --metrics gpu__time_duration.sum --csv \
      attnprof --variant V --timing-iters 0 ...
and compares the number of kernels ncu profiled with
  (kernels per forward, without memcpy/memset, which ncu does not profile) x forwards,
where forwards = wait + warmup + active steps (every step's forward runs inside an
attn_fwd range; the untraced warm-up and the memory probe run outside them).
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

FILTERS = ["attn_fwd/", "regex:.*attn_fwd/"]  # plain name first, then "anywhere in the stack"


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnprof", default="build/attnprof")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--variants", default="naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn")
    ap.add_argument("--shape", default="2x4x512x64")
    args = ap.parse_args()
    b, h, s, d = args.shape.split("x")
    steps = 1 + 1 + 3  # the default schedule: wait, warmup, active
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnprof_nvtx_") as tmp:
        for variant in args.variants.split(","):
            base = [args.attnprof, "--variant", variant, "--batch", b, "--heads", h, "--seq", s, "--head-dim", d,
                    "--timing-iters", "0", "--warmup-iters", "1", "--out", tmp, "--no-gzip"]
            plain = run(base)
            if plain.returncode != 0:
                rows.append((variant, "-", "-", "-", f"skipped: {plain.stderr.strip().splitlines()[-1]}"))
                continue
            with open(os.path.join(tmp, variant, f"{b}_{h}_{s}_{d}_bf16_causal.summary.json")) as fh:
                scope = json.load(fh)["headline"]["scopes"][0]
            kernels = [{"name": k["name"], "count": round(k["count_per_call"])} for k in scope["kernels"]]
            per_fwd = sum(k["count"] for k in kernels if not k["name"].startswith(("Memcpy", "Memset")))
            expected = per_fwd * steps
            got, used = None, None
            for flt in FILTERS:
                p = run([args.ncu, "--nvtx", "--nvtx-include", flt, "--clock-control", "none",
                         "--metrics", "gpu__time_duration.sum", "--csv"] + base)
                lines = [l for l in p.stdout.splitlines() if l.startswith('"')]
                recs = list(csv.DictReader(io.StringIO("\n".join(lines)))) if lines else []
                names = {r["ID"]: r.get("Kernel Name", "?") for r in recs}
                if names:
                    got, used = len(names), flt
                    break
            ok = got == expected
            failures += not ok
            rows.append((variant, str(per_fwd), str(expected), str(got), f"{'ok' if ok else 'MISMATCH'} (filter {used})"))
            if not ok:
                ncu_names = sorted(set(names.values())) if got else []
                rows.append(("", "", "", "", "attnprof: " + "; ".join(f"{k['count']}x {k['name'][:60]}" for k in kernels)))
                rows.append(("", "", "", "", "ncu: " + "; ".join(n[:60] for n in ncu_names)))
    print(f"{'variant':<16}{'kernels/fwd':>12}{'expected':>10}{'ncu':>6}  verdict")
    for r in rows:
        print(f"{r[0]:<16}{r[1]:>12}{r[2]:>10}{r[3]:>6}  {r[4]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
