#!/usr/bin/env python3
"""The counter pass against Nsight Compute: attnprof's in-process counters
(CUPTI Range Profiler, `--counters`) and ncu's, for the same kernels of the
same step, must agree.

  python3 scripts/counters_crosscheck.py [--attnprof build/attnprof] [--ncu ncu]
      [--variants naive,sdpa-math,sdpa-cudnn,custom-flash,custom-flash-sm90]
      [--shape 4x16x4096x128] [--pass fwd] [--tolerance 0.05] [--report FILE.md]

For each variant:
  1. `attnprof --variant V --counters` writes per-kernel counters into its summary;
  2. the same problem runs under `ncu --nvtx --nvtx-include <scope> --page raw --csv
     --clock-control none --replay-mode application` with a schedule of one
     profiled step (the unprofiled timing off), so ncu profiles the kernels of
     exactly one step's scope (`attn_fwd`, `attn_bwd`: start/end NVTX ranges,
     caught on every thread). attnprof's pass reruns the step once per hardware
     pass and starts each scope on a cold L2; so the scope's first kernel is taken
     from a run with `--cache-control all --launch-count 1` (L2 flushed and
     invalidated before it), the others from one with `--cache-control none`
     (each after the same kernels, in the cache they leave). Kernel replay
     instead restores memory around every pass, and the restores' dirty lines
     show up as the kernel's DRAM writes;
  3. kernels are matched by scope and launch order (their function names, without
     namespaces and template arguments, must agree), and
     compared per variant: total duration, total DRAM bytes (read + written) and
     the time-weighted tensor-pipe activity, each within --tolerance (relative;
     tensor activity also passes within 1 percentage point, for kernels that use
     no tensor pipe); and the same per kernel for kernels of at least 10 us.
Exits 1 on any disagreement, 77 when ncu or a GPU is missing.
"""
import argparse
import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def problem_args(shape, pass_):
    b, h, s, d = shape.split("x")
    return ["--batch", b, "--heads", h, "--seq", s, "--head-dim", d, "--pass", pass_]


def attnprof_counters(summary):
    """[(scope, kernel, duration_ns, dram_bytes, tensor_pct, read_bytes, write_bytes)] from a summary's counter pass."""
    cp = summary.get("counters") or {}
    if cp.get("state") != "collected":
        raise RuntimeError(f"counter pass {cp.get('state')}: {cp.get('reason')}")
    rows = []
    for k in cp["kernels"]:
        v = k.get("values", k)
        rd, wr = v.get("dram_read_bytes") or 0, v.get("dram_write_bytes") or 0
        rows.append((k["scope"], k["kernel"], v.get("duration_ns"), rd + wr, v.get("tensor_active_pct"), rd, wr))
    return rows


def ncu_run(ncu, exe, variant, pargs, scope, cache, tmp, extra=()):
    """ncu's rows for the kernels of one scope of one profiled step."""
    cmd = [ncu, "--nvtx", "--nvtx-include", scope, "--clock-control", "none", "--replay-mode", "application",
           "--cache-control", cache, *extra, "--csv", "--page", "raw",
           "--metrics", ",".join(METRICS), exe, "--variant", variant, *pargs, "--timing-iters", "0",
           "--warmup-iters", "1", "--wait", "0", "--warmup", "0", "--active", "1", "--quiet",
           "--out", os.path.join(tmp, f"ncu_{scope}_{cache}")]
    p = run(cmd)
    lines = [l for l in p.stdout.splitlines() if l.startswith('"')]
    if not lines:
        raise RuntimeError(f"ncu profiled nothing for {variant} {scope} (exit {p.returncode}): "
                           f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    recs = list(csv.DictReader(io.StringIO("\n".join(lines))))
    recs = [r for r in recs if r.get("ID", "").strip().isdigit()]  # the units row has no ID
    rows = []
    for r in sorted(recs, key=lambda r: int(r["ID"])):
        num = lambda m: float(r[m].replace(",", "")) if r.get(m, "").strip() not in ("", "n/a") else None
        rd, wr = num(METRICS[1]) or 0, num(METRICS[2]) or 0
        rows.append((scope, r.get("Kernel Name", "?"), num(METRICS[0]), rd + wr, num(METRICS[3]), rd, wr))
    return rows


def ncu_counters(ncu, exe, variant, pargs, scopes, tmp):
    """Each scope as attnprof counts it: its first kernel from a cold L2 (ncu's
    --cache-control all: flushed and invalidated before it), the kernels after
    it in the cache their predecessors leave (--cache-control none)."""
    rows = []
    for scope in scopes:
        first = ncu_run(ncu, exe, variant, pargs, scope, "all", tmp, ("--launch-count", "1"))
        rows += first[:1] + ncu_run(ncu, exe, variant, pargs, scope, "none", tmp)[1:]
    return rows


def base_name(name):
    """The kernel's function name alone: ncu prints `flash_fwd_sm90_kernel<...>`
    where the trace has `void attnprof::flash_sm90::flash_fwd_sm90_kernel<...>(...)`."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the first '<' or '(' outside brackets ends the qualified name
        if ch in "<(" and depth == 0:
            cut = i
            break
    return name[:cut].split("::")[-1]


def close(a, b, tol, abs_floor=0.0):
    if a is None or b is None:
        return False
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), abs_floor)


def weighted(rows, i):
    t = sum(r[2] or 0 for r in rows)
    return sum((r[i] or 0) * (r[2] or 0) for r in rows) / t if t else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnprof", default="build/attnprof")
    ap.add_argument("--ncu", default="ncu")
    ap.add_argument("--variants", default="naive,sdpa-math,sdpa-cudnn,custom-flash,custom-flash-sm90")
    # q, k, v of 201 MB, over three times the H200's 60 MB L2: DRAM bytes then say
    # what a kernel moves, not what a replay happened to leave in the cache.
    ap.add_argument("--shape", default="4x16x4096x128")
    ap.add_argument("--pass", dest="pass_", default="fwd", choices=["fwd", "bwd", "fwd+bwd"])
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--report")
    args = ap.parse_args()
    if not shutil.which(args.ncu):
        print(f"SKIP: {args.ncu} not found")
        return 77
    scopes = {"fwd": ["attn_fwd"], "bwd": ["attn_bwd"], "fwd+bwd": ["attn_fwd", "attn_bwd"]}[args.pass_]
    pargs = problem_args(args.shape, args.pass_)
    out = [f"# Counter pass vs Nsight Compute ({args.shape}, {args.pass_}, tolerance {args.tolerance:.0%})", "",
           "| variant | kernels | duration us (attnprof / ncu) | DRAM MB (attnprof / ncu) | tensor % (attnprof / ncu) | verdict |",
           "|---|---:|---:|---:|---:|---|"]
    bad = 0
    # Per kernel, DRAM read and write apart: where a total disagrees, which side moved.
    detail = ["", "## Per kernel: DRAM read / write MB (attnprof / ncu)", "",
              "| variant | scope | kernel | us (attnprof / ncu) | read MB | write MB |", "|---|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="attnprof_counters_") as tmp:
        for variant in args.variants.split(","):
            p = run([args.attnprof, "--variant", variant, *pargs, "--counters", "--quiet", "--out", tmp])
            if p.returncode == 3:
                out.append(f"| {variant} | | | | | skipped: {p.stderr.strip().splitlines()[-1:]} |")
                continue
            try:
                if p.returncode != 0:
                    raise RuntimeError(f"attnprof exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
                [path] = glob.glob(os.path.join(tmp, variant, "*.summary.json"))
                with open(path) as fh:
                    ours = attnprof_counters(json.load(fh))
                theirs = ncu_counters(args.ncu, args.attnprof, variant, pargs, scopes, tmp)
            except (RuntimeError, ValueError, KeyError) as e:
                bad += 1
                out.append(f"| {variant} | | | | | ERROR: {e} |")
                continue
            problems = []
            if len(ours) != len(theirs):
                problems.append(f"{len(ours)} kernels against ncu's {len(theirs)}")
            else:
                for a, b in zip(ours, theirs):
                    if a[0] != b[0] or base_name(a[1]) != base_name(b[1]):
                        problems.append(f"kernel order differs: {base_name(a[1])} / {base_name(b[1])}")
                        break
                    if (a[2] or 0) >= 10e3 or (b[2] or 0) >= 10e3:
                        for i, what, floor in ((2, "duration", 0.0), (3, "DRAM bytes", 0.0), (4, "tensor %", 1.0)):
                            if not close(a[i], b[i], args.tolerance, floor):
                                problems.append(f"{a[1][:30]} {what} {a[i]:.4g} vs {b[i]:.4g}")
            for a, b in zip(ours, theirs):
                detail.append(f"| {variant} | {a[0]} | {base_name(a[1])[:40]} | {(a[2] or 0) / 1e3:.1f} / {(b[2] or 0) / 1e3:.1f} | "
                              f"{a[5] / 1e6:.2f} / {b[5] / 1e6:.2f} | {a[6] / 1e6:.2f} / {b[6] / 1e6:.2f} |")
            dur = (sum(r[2] or 0 for r in ours), sum(r[2] or 0 for r in theirs))
            dram = (sum(r[3] for r in ours), sum(r[3] for r in theirs))
            tens = (weighted(ours, 4), weighted(theirs, 4))
            for what, pair, floor in (("duration", dur, 0.0), ("DRAM bytes", dram, 0.0), ("tensor %", tens, 1.0)):
                if not close(pair[0], pair[1], args.tolerance, floor):
                    problems.append(f"total {what} {pair[0]:.4g} vs {pair[1]:.4g}")
            bad += bool(problems)
            out.append(f"| {variant} | {len(ours)} | {dur[0] / 1e3:.1f} / {dur[1] / 1e3:.1f} | "
                       f"{dram[0] / 1e6:.1f} / {dram[1] / 1e6:.1f} | {tens[0]:.1f} / {tens[1]:.1f} | "
                       f"{'agree' if not problems else 'DISAGREE: ' + '; '.join(problems[:4])} |")
    text = "\n".join(out + detail)
    print(text)
    if args.report:
        with open(args.report, "w") as fh:
            fh.write(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
