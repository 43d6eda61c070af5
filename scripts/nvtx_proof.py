#!/usr/bin/env python3
"""Show that attnprof's NVTX ranges are real: Nsight Compute, filtered to one
scope's ranges, must capture exactly the kernels attnprof's profiler counts in
that scope, for the forward (`attn_fwd`) and the backward (`attn_bwd`, whose
kernels autograd launches from its own thread).

  python3 scripts/nvtx_proof.py [--attnprof build/attnprof] [--variants naive,sdpa-flash,...]
                                [--passes fwd,bwd,fwd+bwd]

For each pass, scope and variant it runs
  ncu --nvtx --nvtx-include <filter> --clock-control none --metrics gpu__time_duration.sum --csv \
      attnprof --variant V --pass P --timing-iters 0 ...
and compares the number of kernels ncu profiled with
  (kernels per step in that scope, without memcpy/memset, which ncu does not profile) x steps,
where steps = wait + warmup + active (every step's scopes run inside their ranges;
the untraced warm-up and the memory probe run outside them). Each scope is two
NVTX ranges of its name: push/pop (filter `attn_fwd/`, the launching thread's
only) and start/end (filter `attn_bwd`, no slash: any thread). The backward
needs the start/end form; the forward is checked with both.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

# Per scope, the filters tried in order: push/pop first where it can work, then start/end.
FILTERS = {"attn_fwd": ["attn_fwd/", "attn_fwd"], "attn_bwd": ["attn_bwd"]}
PASS_SCOPES = {"fwd": ["attn_fwd"], "bwd": ["attn_bwd"], "fwd+bwd": ["attn_fwd", "attn_bwd"]}
STEM_SUFFIX = {"fwd": "", "bwd": "_bwd", "fwd+bwd": "_fwdbwd"}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnprof", default="build/attnprof")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--variants", default="naive,inplace,sdpa-math,sdpa-efficient,sdpa-flash,sdpa-cudnn")
    ap.add_argument("--passes", default="fwd,bwd,fwd+bwd")
    ap.add_argument("--shape", default="2x4x512x64")
    args = ap.parse_args()
    b, h, s, d = args.shape.split("x")
    steps = 1 + 1 + 3  # the default schedule: wait, warmup, active
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnprof_nvtx_") as tmp:
        for pass_ in args.passes.split(","):
            for variant in args.variants.split(","):
                base = [args.attnprof, "--variant", variant, "--batch", b, "--heads", h, "--seq", s, "--head-dim", d,
                        "--pass", pass_, "--timing-iters", "0", "--warmup-iters", "1", "--out", tmp, "--no-gzip"]
                plain = run(base)
                if plain.returncode != 0:
                    rows.append((pass_, variant, "-", "-", "-", "-",
                                 f"skipped: {plain.stderr.strip().splitlines()[-1:]}"))
                    continue
                stem = f"{b}_{h}_{s}_{d}_bf16_causal{STEM_SUFFIX[pass_]}"
                with open(os.path.join(tmp, variant, f"{stem}.summary.json")) as fh:
                    scopes = {sc["scope"]: sc for sc in json.load(fh)["headline"]["scopes"]}
                for scope in PASS_SCOPES[pass_]:
                    kernels = [{"name": k["name"], "count": round(k["count_per_call"])} for k in scopes[scope]["kernels"]]
                    per_step = sum(k["count"] for k in kernels if not k["name"].startswith(("Memcpy", "Memset")))
                    expected = per_step * steps
                    got, used, names = None, None, {}
                    for flt in FILTERS[scope]:
                        p = run([args.ncu, "--nvtx", "--nvtx-include", flt, "--clock-control", "none",
                                 "--metrics", "gpu__time_duration.sum", "--csv"] + base)
                        lines = [l for l in p.stdout.splitlines() if l.startswith('"')]
                        recs = list(csv.DictReader(io.StringIO("\n".join(lines)))) if lines else []
                        names = {r["ID"]: r.get("Kernel Name", "?") for r in recs}
                        got, used = len(names), flt
                        if got == expected:
                            break
                    ok = got == expected
                    failures += not ok
                    rows.append((pass_, variant, scope, str(per_step), str(expected), str(got),
                                 f"{'ok' if ok else 'MISMATCH'} (filter {used})"))
                    if not ok:
                        ncu_names = sorted(set(names.values()))
                        rows.append(("", "", "", "", "", "", "attnprof: " + "; ".join(f"{k['count']}x {k['name'][:60]}" for k in kernels)))
                        rows.append(("", "", "", "", "", "", "ncu: " + "; ".join(n[:60] for n in ncu_names)))
    print(f"{'pass':<8}{'variant':<16}{'scope':<10}{'kernels/step':>13}{'expected':>10}{'ncu':>6}  verdict")
    for r in rows:
        print(f"{r[0]:<8}{r[1]:<16}{r[2]:<10}{r[3]:>13}{r[4]:>10}{r[5]:>6}  {r[6]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
