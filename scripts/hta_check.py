#!/usr/bin/env python3
"""Holistic Trace Analysis (PyPI holistictraceanalysis) reads an attnprof output
folder as it is, and its totals agree with attnprof's summary.

  python3 scripts/hta_check.py --attnprof build/attnprof [--device cpu|cuda]
  python3 scripts/hta_check.py --from DIR   (an existing output folder, e.g. GPU traces)

Runs attnprof (naive and sdpa-math, tiny shapes on the CPU; naive,
sdpa-flash on CUDA), points HTA's TraceAnalysis at each run's trace folder
(DIR/<variant>/<stem>/, which holds only that run's *.pt.trace.json.gz), and
compares per name: on the CPU, the call count and summed duration of every
CPU op and user scope HTA sees with the summary's key-averages rows (after the
one documented difference: key averages fold an op that redispatches to
itself into one call, HTA counts two; see fold_redispatches); on CUDA,
also every kernel's count and summed duration with the summary's Self CUDA
rows and HTA's own kernel breakdown. HTA runs with include_last_profiler_step
(its default drops the last step, which Kineto may cut short in a Python
loop; attnprof's steps all end with a synchronise) and without its rounding of
nanosecond timestamps to microseconds (HTA_DISABLE_NS_ROUNDING=1).
Exits 0 when everything agrees to 0.01 us per event, 1 otherwise, 77 when HTA
(scripts/setup_hta.sh installs it into .venv-hta) or, with --device cuda, a
GPU is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HTA_DISABLE_NS_ROUNDING", "1")
try:
    import logging

    from hta.trace_analysis import TraceAnalysis

    logging.getLogger("hta").setLevel(logging.ERROR)
except Exception as exc:  # pragma: no cover - depends on the machine
    print(f"SKIP: Holistic Trace Analysis is not importable here ({exc.__class__.__name__}: {exc}); "
          "scripts/setup_hta.sh installs the pinned version into .venv-hta")
    sys.exit(77)

TOL_US = 0.01  # per event: Kineto writes microseconds with three decimals


def hta_frame(folder):
    """The one rank's events as HTA parsed them, names decoded."""
    analyzer = TraceAnalysis(trace_dir=folder, include_last_profiler_step=True)
    ranks = list(analyzer.t.traces.keys())
    if ranks != [0]:
        raise AssertionError(f"HTA found ranks {ranks} in {folder}, expected [0]")
    df = analyzer.t.get_trace(0).copy()
    names = analyzer.t.symbol_table.get_sym_table()
    df["cat_s"] = df["cat"].map(lambda i: names[i])
    df["name_s"] = df["name"].map(lambda i: names[i])
    return analyzer, df


def fold_redispatches(df):
    """The events key_averages counts: Python's EventList._remove_dup_nodes (and
    attnprof's key averages after it) drops an op whose parent has the same
    name and no other child (aten::mul redispatching to aten::mul); HTA keeps
    both, so the fold is applied to HTA's events before they are compared."""
    keep = [True] * len(df)
    rows = df.reset_index(drop=True)
    for _, g in rows.groupby("tid"):
        order = sorted(g.index, key=lambda i: (rows.at[i, "ts"], -rows.at[i, "dur"]))
        parent, children, stack = {}, {}, []
        for i in order:
            end = rows.at[i, "ts"] + rows.at[i, "dur"]
            while stack and rows.at[stack[-1], "ts"] + rows.at[stack[-1], "dur"] < end:
                stack.pop()
            if stack:
                parent[i] = stack[-1]
                children[stack[-1]] = children.get(stack[-1], 0) + 1
            stack.append(i)
        for i, p in parent.items():
            if rows.at[i, "name_s"] == rows.at[p, "name_s"] and children.get(p) == 1:
                keep[i] = False
    return rows[keep]


def compare(label, hta_rows, summary_rows, problems, lines):
    """hta_rows/summary_rows: {name: (count, total_us)}."""
    for name in sorted(set(hta_rows) | set(summary_rows)):
        h, s = hta_rows.get(name), summary_rows.get(name)
        if h is None or s is None:
            problems.append(f"{label}: {name!r} only in {'the summary' if h is None else 'HTA'}")
            continue
        ok = h[0] == s[0] and abs(h[1] - s[1]) <= TOL_US * max(h[0], 1)
        lines.append(f"  {label:<7} {name[:60]:<60} {h[0]:>5} {s[0]:>5} {h[1]:>12.3f} {s[1]:>12.3f}  "
                     f"{'ok' if ok else 'MISMATCH'}")
        if not ok:
            problems.append(f"{label}: {name}: HTA {h[0]} calls, {h[1]:.3f} us; summary {s[0]}, {s[1]:.3f} us")


def check_run(out, variant, stem, on_cuda):
    problems, lines = [], []
    folder = os.path.join(out, variant, stem)
    traces = [f for f in os.listdir(folder)]
    if traces != [stem + ".pt.trace.json.gz"]:
        problems.append(f"{folder} holds {traces}, expected only {stem}.pt.trace.json.gz")
    with open(os.path.join(out, variant, stem + ".summary.json")) as fh:
        summary = json.load(fh)
    analyzer, df = hta_frame(folder)
    by_name = lambda cats: {
        n: (int(g.shape[0]), float(g["dur"].sum())) for n, g in df[df["cat_s"].isin(cats)].groupby("name_s")}

    # CPU ops and user scopes; ProfilerStep#N fold into ProfilerStep*, as in the table.
    # CUDA runtime and driver calls are CPU rows of the table too.
    cpu = fold_redispatches(df[df["cat_s"].isin(["cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"])])
    hta_cpu = {}
    for n, g in cpu.groupby("name_s"):
        c, t = int(g.shape[0]), float(g["dur"].sum())
        key = "ProfilerStep*" if n.startswith("ProfilerStep#") else n
        pc, pt = hta_cpu.get(key, (0, 0.0))
        hta_cpu[key] = (pc + c, pt + t)
    summ_cpu = {o["name"]: (o["count"], o["cpu_time_total_us"]) for o in summary["ops"] if o["device"] == "cpu"}
    compare("cpu", hta_cpu, summ_cpu, problems, lines)

    if on_cuda:
        hta_k = by_name(["kernel", "gpu_memcpy", "gpu_memset"])
        summ_k = {o["name"]: (o["count"], o["self_cuda_time_total_us"]) for o in summary["ops"]
                  if o["device"] == "cuda" and not o["is_user_annotation"]}
        compare("kernel", hta_k, summ_k, problems, lines)
        # HTA's own analysis: the kernel breakdown's per-kernel sums.
        _, metrics = analyzer.get_gpu_kernel_breakdown(visualize=False)
        for _, row in metrics.iterrows():
            name = row["name"]  # HTA 0.5.0's column (not "kernel_name")
            if name in summ_k and abs(float(row["sum (us)"]) - summ_k[name][1]) > TOL_US * summ_k[name][0] + 1.0:
                problems.append(f"HTA kernel breakdown: {name}: {row['sum (us)']} us vs summary {summ_k[name][1]:.3f}")
    return problems, lines


def check_folder(out):
    """Every run under an existing attnprof output folder (--from)."""
    problems = []
    runs = sorted((v, f[: -len(".summary.json")]) for v in os.listdir(out) if os.path.isdir(os.path.join(out, v))
                  for f in os.listdir(os.path.join(out, v)) if f.endswith(".summary.json"))
    for variant, stem in runs:
        with open(os.path.join(out, variant, stem + ".summary.json")) as fh:
            s = json.load(fh)
        if s["status"] != "ok" or not os.path.isdir(os.path.join(out, variant, stem)):
            continue
        found, lines = check_run(out, variant, stem, s["problem"]["device"].startswith("cuda"))
        print(f"{variant} {stem}: {'agree' if not found else 'DIFFER'}")
        print("\n".join(lines))
        problems += [f"{variant}/{stem}: {x}" for x in found]
    if not runs:
        problems.append(f"no summaries under {out}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attnprof", default=os.path.join(os.path.dirname(__file__), "..", "build", "attnprof"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--from", dest="from_dir", help="check this existing output folder instead of running attnprof "
                    "(e.g. GPU traces brought back from scripts/gpu_check.sh's hta stage)")
    args = ap.parse_args()
    if args.from_dir:
        problems = check_folder(args.from_dir)
        for x in problems:
            print("MISMATCH " + x)
        print(f"\n{len(problems)} mismatch(es)" if problems else "\nHTA and attnprof agree")
        return 1 if problems else 0
    on_cuda = args.device == "cuda"
    if on_cuda:
        variants, shape = "naive,sdpa-flash", ["--batch", "2", "--heads", "4", "--seq", "256", "--head-dim", "64"]
    else:
        variants, shape = "naive,sdpa-math", ["--batch", "1", "--heads", "2", "--seq", "48", "--head-dim", "32"]
    problems = []
    with tempfile.TemporaryDirectory(prefix="attnprof_hta_") as out:
        cmd = [args.attnprof, "--device", args.device, "--variant", variants, "--timing-iters", "0", "--out", out,
               *shape]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode == 3 or (on_cuda and "no CUDA device" in p.stderr):
            print(f"SKIP: {p.stderr.strip()}")
            return 77
        if p.returncode != 0:
            print(f"FAIL: attnprof exited {p.returncode}: {p.stderr.strip()}")
            return 1
        stem = "_".join(shape[i] for i in (1, 3, 5, 7)) + "_bf16_causal"
        print(f"  {'':<7} {'name':<60} {'HTA':>5} {'summ':>5} {'HTA us':>12} {'summ us':>12}")
        for variant in variants.split(","):
            found, lines = check_run(out, variant, stem, on_cuda)
            print(f"{variant} {stem}: {'agree' if not found else 'DIFFER'}")
            print("\n".join(lines))
            problems += [f"{variant}: {x}" for x in found]
    for x in problems:
        print("MISMATCH " + x)
    print(f"\n{len(problems)} mismatch(es)" if problems else "\nHTA and attnprof agree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
