#!/usr/bin/env python3
"""Cross-check attnprof against Python's torch.profiler on the same workload.

For each variant and shape, the same pass runs under torch.profiler (schedule
wait=1, warmup=1, active=3; the forward in record_function("attn_fwd"), the
backward -- loss.backward() of a forward run outside the scope -- in
record_function("attn_bwd")) and through attnprof (its summary.json).
Compared per measured scope: kernels per call (count and names), GPU time avg
(5%); for the run: op names and call counts of key_averages, Self CUDA per op
(5%, for ops holding at least 2% of the device time) and CPU time avg
(reported side by side; C++ should be lower). Python synchronises each step
as attnprof does; a second, blog-style Python run (prof.step() with no
synchronise) is compared too, with its expected differences listed and
checked (BLOG_DIFFERENCES: the cudaDeviceSynchronize count, step CPU times). Exits 1 on a mismatch beyond
tolerance, 77 when torch is not importable (ctest treats that as a skip).

  python3 scripts/crosscheck.py --attnprof build/attnprof [--device cuda] [--pass fwd|bwd|fwd+bwd] \
      [--shapes 8x16x1024x64,4x16x4096x128] [--variants naive,inplace,...] [--record docs/bench]

--record DIR (CUDA only) adds the verdicts and each scope's GPU time on both
sides to DIR/crosscheck.json, the records BENCHMARKS.md is made from
(scripts/bench_records.py).

attnprof's own variants (custom-flash, custom-flash-sm90) run in Python as
their operators, torch.ops.attnprof.*, from --lib (the attnprof_core library
beside --attnprof by default): the same dispatcher path and autograd node the
C++ variants take.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_records  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    from torch.autograd import DeviceType
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
except Exception as exc:  # pragma: no cover - depends on the machine
    print(f"SKIP: Python torch is not importable here ({exc.__class__.__name__}: {exc})")
    sys.exit(77)

CORE_VARIANTS = ["naive", "inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "sdpa-auto"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BACKENDS = {
    "sdpa-math": SDPBackend.MATH,
    "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
    "sdpa-flash": SDPBackend.FLASH_ATTENTION,
    "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
}
# attnprof's fused variants and the operators they call (scripts/ops_check.py
# loads the same library).
CUSTOM_OPS = {"custom-flash": "flash_attention", "custom-flash-sm90": "flash_attention_sm90"}
# Rows only Python's profiler creates, and why.
PYTHON_ONLY = {}
# GPU-side user annotations measure the span from the first to the last kernel of
# a scope, idle gaps included; C++ launches faster, so its gaps (and spans) are
# shorter. They are reported, not compared.
ANNOTATIONS = {"attn_fwd", "attn_bwd", "ProfilerStep*"}
SCOPES = {"fwd": ["attn_fwd"], "bwd": ["attn_bwd"], "fwd+bwd": ["attn_fwd", "attn_bwd"]}
# Ops whose call counts legitimately differ, and why. A difference is explained
# only when C++'s count is exactly `factor` times Python's.
COUNT_EXPLAINED = {}


def python_forward(variant, q, k, v, causal):
    """The same computation attnprof's variant runs, written as Python users do."""
    seq = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1) if causal else None
    if variant == "naive":
        def f():
            s = torch.matmul(q, k.transpose(-2, -1)) * scale
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            return torch.matmul(torch.softmax(s, -1), v)
    elif variant == "inplace":
        def f():
            s = torch.mul(torch.matmul(q, k.transpose(-2, -1)), scale)
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            return torch.matmul(torch.softmax(s, -1), v)
    elif variant in BACKENDS:
        backend = BACKENDS[variant]
        def f():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    elif variant == "sdpa-auto":
        def f():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    elif variant in CUSTOM_OPS and hasattr(torch.ops.attnprof, CUSTOM_OPS[variant]):
        op = getattr(torch.ops.attnprof, CUSTOM_OPS[variant])
        def f():
            return op(q, k, v, causal, scale)[0]
    else:
        return None
    return f


def python_profile(variant, shape, dtype, device, causal, pass_="fwd", warmup_iters=3, blog=False):
    """blog=True: the loop as blog posts write it, prof.step() without a device
    synchronise per step (attnprof, and the default here, synchronise each step)."""
    b, h, s, d = shape
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, dtype=DTYPES[dtype], device=device, generator=g) for _ in range(3))
    grad_out = torch.randn(b, h, s, d, dtype=DTYPES[dtype], device=device, generator=g)
    backward = pass_ != "fwd"
    if backward:
        for t in (q, k, v):
            t.requires_grad_(True)
    f = python_forward(variant, q, k, v, causal)
    on_cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if on_cuda else (lambda: None)

    def step(scoped):
        if not backward:
            with torch.no_grad():
                if scoped:
                    with record_function("attn_fwd"):
                        f()
                else:
                    f()
            return
        for t in (q, k, v):
            t.grad = None
        if scoped and pass_ == "fwd+bwd":
            with record_function("attn_fwd"):
                out = f()
        else:
            out = f()
        if scoped:
            with record_function("attn_bwd"):
                out.backward(grad_out)
        else:
            out.backward(grad_out)

    for _ in range(warmup_iters):
        step(False)
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with profile(activities=acts, schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            step(True)
            if not blog:
                sync()
            prof.step()
    events = prof.events()

    def walk(e, out):
        out.extend(kinfo.name for kinfo in e.kernels)
        for c in e.cpu_children:
            walk(c, out)

    # On CUDA, autograd runs backward's nodes on its device thread while this
    # thread waits inside attn_bwd, so the record_function's own row shows no
    # CUDA time. As attnprof does, a scope also takes the top-level ops of other
    # threads that run inside its span (SCOPE_ADOPTION).
    top = [e for e in events if e.device_type == DeviceType.CPU and e.cpu_parent is None]

    def inside(e):
        return [r for r in top if r.thread != e.thread and r.time_range.start >= e.time_range.start
                and r.time_range.end <= e.time_range.end]

    scopes = {}
    for scope in SCOPES[pass_]:
        calls = [e for e in events if e.name == scope and e.device_type == DeviceType.CPU]
        per_call, cuda = [], 0.0
        for e in calls:
            names = []
            walk(e, names)
            cuda += e.device_time_total
            for r in inside(e):
                walk(r, names)
                cuda += r.device_time_total
            per_call.append(names)
        n = max(len(calls), 1)
        scopes[scope] = {
            "kernels_per_call": sum(len(x) for x in per_call) / max(len(per_call), 1),
            "kernels": per_call[0] if per_call else [],
            "cuda_avg_us": cuda / n,
            "cpu_avg_us": sum(e.cpu_time_total for e in calls) / n,
        }
    rows = {}
    for r in prof.key_averages():
        dev = "cuda" if r.device_type != DeviceType.CPU else "cpu"
        rows[(r.key, dev)] = {"count": r.count, "self_cuda_us": r.self_device_time_total,
                              "cuda_total_us": r.device_time_total, "cpu_total_us": r.cpu_time_total}
    fwd_row = rows.get(("attn_fwd", "cpu"), {"count": 0})
    return {"scopes": scopes, "rows": rows}


def attnprof_profile(exe, variant, shape, dtype, device, causal, out_dir, pass_="fwd"):
    b, h, s, d = shape
    cmd = [exe, "--variant", variant, "--dtype", dtype, "--device", device, "--batch", str(b), "--heads", str(h),
           "--seq", str(s), "--head-dim", str(d), "--out", out_dir, "--timing-iters", "0", "--no-gzip",
           "--pass", pass_, "--causal" if causal else "--no-causal"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 3:
        return None, p.stderr.strip().splitlines()[-1]
    if p.returncode != 0:
        raise RuntimeError(f"attnprof failed ({p.returncode}): {p.stderr.strip()}")
    stem = f"{b}_{h}_{s}_{d}_{dtype}_{'causal' if causal else 'full'}" + {"fwd": "", "bwd": "_bwd", "fwd+bwd": "_fwdbwd"}[pass_]
    with open(os.path.join(out_dir, variant, stem + ".summary.json")) as fh:
        summ = json.load(fh)
    rows = {(r["name"], r["device"]): r for r in summ["ops"]}
    on_cuda = summ["problem"]["device"].startswith("cuda")
    scopes = {}
    for sc in summ["headline"]["scopes"]:
        scopes[sc["scope"]] = {
            "kernels_per_call": sc["kernels_per_call"] if on_cuda else 0.0,
            "kernels": [k["name"] for k in sc["kernels"] for _ in range(round(k["count_per_call"]))],
            "cuda_avg_us": sc["cuda_time_avg_us"] if on_cuda else 0.0,
            "cpu_avg_us": sc["cpu_time_avg_us"],
        }
    return {
        "scopes": scopes,
        "rows": {key: {"count": r["count"], "self_cuda_us": r["self_cuda_time_total_us"],
                       "cuda_total_us": r["cuda_time_total_us"], "cpu_total_us": r["cpu_time_total_us"]}
                 for key, r in rows.items()},
    }, None


def pct(a, b):
    if b == 0:
        return 0.0 if a == 0 else float("inf")
    return 100.0 * (a - b) / b


def compare(variant, shape, py, cc, on_cuda, tol):
    lines, failures = [], []
    def row(what, cval, pval, verdict):
        lines.append(f"  {what:<34} {cval:>18} {pval:>18}  {verdict}")
    lines.append(f"  {'':<34} {'attnprof (C++)':>18} {'torch.profiler':>18}")
    if "attn_bwd" in cc["scopes"] and on_cuda:
        lines.append(f"  note: {SCOPE_ADOPTION}")
    for scope in sorted(set(cc["scopes"]) | set(py["scopes"])):
        if scope not in cc["scopes"] or scope not in py["scopes"]:
            failures.append(f"scope {scope} is missing on one side")
            continue
        c, p = cc["scopes"][scope], py["scopes"][scope]
        kc, kp = c["kernels_per_call"], p["kernels_per_call"]
        ok = kc == kp and Counter(c["kernels"]) == Counter(p["kernels"])
        row(f"kernels per call of {scope}", f"{kc:g}", f"{kp:g}", "ok" if ok else "MISMATCH")
        if not ok:
            failures.append(f"kernels per {scope} / names differ")
            c_count, p_count = Counter(c["kernels"]), Counter(p["kernels"])
            for name in sorted(set(c_count) | set(p_count)):
                if c_count[name] != p_count[name]:
                    lines.append(f"      per call: C++ {c_count[name]} x, Python {p_count[name]} x: {name[:100]}")
    keys_c = {k: v["count"] for k, v in cc["rows"].items()}
    keys_p = {k: v["count"] for k, v in py["rows"].items()}
    only_p = sorted(set(keys_p) - set(keys_c))
    only_c = sorted(set(keys_c) - set(keys_p))
    count_diff, explained = [], []
    for k in sorted(set(keys_c) & set(keys_p)):
        if keys_c[k] == keys_p[k]:
            continue
        factor, why = COUNT_EXPLAINED.get(k[0], (None, None))
        (explained if factor and keys_c[k] == factor * keys_p[k] else count_diff).append(k)
    unexplained = [k for k in only_p if k[0] not in PYTHON_ONLY]
    ok = not unexplained and not only_c and not count_diff
    row("key_averages ops (name, calls)", str(len(keys_c)), str(len(keys_p)), "ok" if ok else "MISMATCH")
    for k in only_p:
        lines.append(f"      only in Python: {k[0]} [{k[1]}] - {PYTHON_ONLY.get(k[0], 'unexplained')}")
    for k in only_c:
        lines.append(f"      only in C++: {k[0]} [{k[1]}]")
    for k in count_diff:
        lines.append(f"      calls differ: {k[0]} [{k[1]}] C++ {keys_c[k]} vs Python {keys_p[k]}")
    for k in explained:
        lines.append(f"      calls differ, explained: {k[0]} [{k[1]}] C++ {keys_c[k]} vs Python {keys_p[k]}: "
                     f"{COUNT_EXPLAINED[k[0]][1]}")
    if not ok:
        failures.append("op names / call counts differ")
    common = [sc for sc in cc["scopes"] if sc in py["scopes"]]
    if on_cuda:
        for scope in common:
            gc, gp = cc["scopes"][scope]["cuda_avg_us"], py["scopes"][scope]["cuda_avg_us"]
            d = pct(gc, gp)
            ok = abs(d) <= tol * 100
            row(f"{scope} GPU time avg (us)", f"{gc:.1f}", f"{gp:.1f}", f"{d:+.1f}% {'ok' if ok else 'BEYOND TOLERANCE'}")
            if not ok:
                failures.append(f"{scope} GPU time differs by {d:+.1f}%")
        total = sum(v["self_cuda_us"] for k, v in py["rows"].items() if k[1] == "cuda")
        worst = 0.0
        for k in set(keys_c) & set(keys_p):
            if k[1] == "cuda" and k[0] in ANNOTATIONS:
                continue  # a span on the GPU timeline, not kernel time: see ANNOTATIONS
            sp, sc = py["rows"][k]["self_cuda_us"], cc["rows"][k]["self_cuda_us"]
            if total > 0 and sp >= 0.02 * total:
                dd = pct(sc, sp)
                if abs(dd) > abs(worst):
                    worst = dd
                if abs(dd) > tol * 100:
                    failures.append(f"Self CUDA of {k[0][:60]} differs by {dd:+.1f}%")
        row("Self CUDA per op, worst (ops >=2%)", "", "", f"{worst:+.1f}% {'ok' if abs(worst) <= tol * 100 else 'BEYOND TOLERANCE'}")
        for scope in common:
            span = (scope, "cuda")
            if span in cc["rows"] and span in py["rows"]:
                n = max(cc["rows"][span]["count"], 1)
                sc, sp = cc["rows"][span]["self_cuda_us"] / n, py["rows"][span]["self_cuda_us"] / n
                row(f"{scope} GPU span avg (us, info)", f"{sc:.1f}", f"{sp:.1f}", f"{pct(sc, sp):+.1f}% (gaps included)")
    for scope in common:
        cc_cpu, py_cpu = cc["scopes"][scope]["cpu_avg_us"], py["scopes"][scope]["cpu_avg_us"]
        ratio = cc_cpu / py_cpu if py_cpu else float("nan")
        row(f"{scope} CPU time avg (us)", f"{cc_cpu:.1f}", f"{py_cpu:.1f}", f"C++/Python = {ratio:.2f}")
    return lines, failures


# How a scope's device work is counted on both sides (printed with attn_bwd).
SCOPE_ADOPTION = ("a scope's kernels include those launched by other threads' ops inside its span "
                  "(autograd's device thread runs a CUDA backward); torch.profiler's own attn_bwd row shows "
                  "0 CUDA time there, so both sides are counted this way")

# What a blog-style run (no synchronise per step) shows differently from
# attnprof, and why; compare_blog checks each of these and nothing else differs.
BLOG_DIFFERENCES = [
    "cudaDeviceSynchronize: attnprof ends each of the 3 active steps with one and adds profile.__exit__'s, "
    "4 calls; the blog-style run has only profile.__exit__'s, 1 call (CUDA only)",
    "ProfilerStep* CPU time: attnprof's steps include waiting for the GPU; a blog-style step holds launch time "
    "only, and its kernels may still run during the next step (reported, not compared)",
    "device work of the last warm-up step may still run when recording starts (nothing waited for it): "
    "a kernel, copy or set may show up to one step's calls more (CUDA only)",
    "everything else is the same work: kernels per call and their names, op names and call counts, "
    "GPU time per scope (within the tolerance)",
]


def compare_blog(py, cc, on_cuda, tol, active=3):
    lines, failures = [], []
    def row(what, cval, pval, verdict):
        lines.append(f"  {what:<34} {cval:>18} {pval:>18}  {verdict}")
    lines.append(f"  vs a blog-style torch.profiler run (no synchronise per step); expected differences:")
    lines.extend(f"    - {d}" for d in BLOG_DIFFERENCES)
    lines.append(f"  {'':<34} {'attnprof (C++)':>18} {'blog-style':>18}")
    sync = ("cudaDeviceSynchronize", "cpu")
    want_c, want_p = (active + 1, 1) if on_cuda else (0, 0)
    got_c = cc["rows"].get(sync, {}).get("count", 0)
    got_p = py["rows"].get(sync, {}).get("count", 0)
    ok = got_c == want_c and got_p == want_p
    row("cudaDeviceSynchronize calls", str(got_c), str(got_p), f"{'ok' if ok else 'UNEXPECTED'} "
        f"(expected {want_c} and {want_p})")
    if not ok:
        failures.append(f"blog-style: cudaDeviceSynchronize calls {got_c} / {got_p}, expected {want_c} / {want_p}")
    for scope, sc in cc["scopes"].items():
        sp = py["scopes"].get(scope)
        if sp is None:
            failures.append(f"blog-style: no {scope} scope")
            continue
        same = sc["kernels_per_call"] == sp["kernels_per_call"] and Counter(sc["kernels"]) == Counter(sp["kernels"])
        row(f"{scope}: kernels per call", f"{sc['kernels_per_call']:g}", f"{sp['kernels_per_call']:g}",
            "ok" if same else "MISMATCH")
        if not same:
            failures.append(f"blog-style: {scope} kernels differ")
        if on_cuda:
            d = pct(sc["cuda_avg_us"], sp["cuda_avg_us"])
            ok = abs(d) <= tol * 100
            row(f"{scope}: GPU time avg (us)", f"{sc['cuda_avg_us']:.1f}", f"{sp['cuda_avg_us']:.1f}",
                f"{d:+.1f}% {'ok' if ok else 'BEYOND TOLERANCE'}")
            if not ok:
                failures.append(f"blog-style: {scope} GPU time differs by {d:+.1f}%")
    counts_c = {k: v["count"] for k, v in cc["rows"].items() if k != sync}
    counts_p = {k: v["count"] for k, v in py["rows"].items() if k != sync}

    def spill(k):
        # Device work of the last warm-up step, still running when recording
        # starts (nothing waited for it): at most one step's calls more.
        c, p = counts_c.get(k), counts_p.get(k)
        return on_cuda and k[1] == "cuda" and c is not None and p is not None and 0 < p - c <= max(c // active, 1)

    spilled = sorted(k for k in set(counts_c) & set(counts_p) if counts_c[k] != counts_p[k] and spill(k))
    differ = sorted(k for k in set(counts_c) | set(counts_p) if counts_c.get(k) != counts_p.get(k) and not spill(k))
    row("other ops (name, calls)", str(len(counts_c)), str(len(counts_p)), "ok" if not differ else "MISMATCH")
    for k in differ:
        lines.append(f"      calls differ: {k[0]} [{k[1]}] C++ {counts_c.get(k)} vs blog-style {counts_p.get(k)}")
    if spilled:
        row("device rows with warm-up spill", "", str(len(spilled)), "expected (at most one step's calls more)")
    if differ:
        failures.append("blog-style: op names / call counts differ beyond cudaDeviceSynchronize")
    step = ("ProfilerStep*", "cpu")
    if step in cc["rows"] and step in py["rows"]:
        n = max(cc["rows"][step]["count"], 1)
        row("ProfilerStep* CPU time avg (us)", f"{cc['rows'][step]['cpu_total_us'] / n:.1f}",
            f"{py['rows'][step]['cpu_total_us'] / n:.1f}", "info (see above)")
    return lines, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attnprof", default=os.path.join(os.path.dirname(__file__), "..", "build", "attnprof"))
    ap.add_argument("--variants", default=",".join(CORE_VARIANTS))
    ap.add_argument("--shapes", default="8x16x1024x64")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-causal", action="store_true")
    ap.add_argument("--pass", dest="pass_", default="fwd",
                    help="what each step runs: fwd, bwd, fwd+bwd, or a comma list")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--report", help="also write the comparison as Markdown here")
    ap.add_argument("--lib", help="attnprof_core library for the custom variants' operators "
                                  "(default: libattnprof_core.so beside --attnprof)")
    bench_records.add_record_flags(ap)
    args = ap.parse_args()
    if args.record and not args.device.startswith("cuda"):
        ap.error(f"--record: records hold GPU runs; --device {args.device} is not one")
    commit = bench_records.commit_for(ap, args)
    lib = args.lib or os.path.join(os.path.dirname(os.path.abspath(args.attnprof)), "libattnprof_core.so")
    if any(v in CUSTOM_OPS for v in args.variants.split(",")):
        if not os.path.exists(lib):
            ap.error(f"the custom variants need the operators' library: {lib} does not exist (--lib)")
        torch.ops.load_library(lib)
    device = "cuda:0" if args.device == "cuda" else args.device
    on_cuda = device.startswith("cuda")
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    passes = args.pass_.split(",")
    failures_all, report, points = [], [], []
    with tempfile.TemporaryDirectory(prefix="attnprof_crosscheck_") as tmp:
        for shape, pass_, variant in ((s, p, v) for s in shapes for p in passes for v in args.variants.split(",")):
                title = (f"{variant} {'x'.join(map(str, shape))} {args.dtype} "
                         f"{'non-causal' if args.no_causal else 'causal'} {pass_} on {device}")
                cc, why = attnprof_profile(args.attnprof, variant, shape, args.dtype, device, not args.no_causal, tmp,
                                           pass_)
                case = {"variant": variant, "shape": "x".join(map(str, shape)),
                        "mask": "full" if args.no_causal else "causal", "pass": pass_, "dtype": args.dtype}
                if cc is None:
                    msg = f"{title}: skipped ({why})"
                    print(msg)
                    report.append(msg)
                    points.append(dict(case, scope=SCOPES[pass_][0], result="skipped", reason=str(why)[:200]))
                    continue
                if python_forward(variant, *(torch.empty(1, 1, 1, 1),) * 3, False) is None:
                    msg = f"{title}: skipped (no Python counterpart for {variant} in this script)"
                    print(msg)
                    report.append(msg)
                    continue
                py = python_profile(variant, shape, args.dtype, device, not args.no_causal, pass_)
                lines, failures = compare(variant, shape, py, cc, on_cuda, args.tolerance)
                blog = python_profile(variant, shape, args.dtype, device, not args.no_causal, pass_, blog=True)
                blog_lines, blog_failures = compare_blog(blog, cc, on_cuda, args.tolerance)
                lines += blog_lines
                failures += blog_failures
                verdict = "PASS" if not failures else "FAIL: " + "; ".join(failures)
                block = [f"{title}: {verdict}"] + lines
                print("\n".join(block), flush=True)
                report.extend(block)
                failures_all.extend(f"{title}: {f}" for f in failures)
                points += scope_points(case, py, cc, "pass" if not failures else "fail")
    if args.report:
        with open(args.report, "w") as fh:
            fh.write("```\n" + "\n".join(report) + "\n```\n")
    print(f"\n{len(failures_all)} mismatch(es)" if failures_all else "\nall cross-checks passed")
    if args.record and points and bench_records.record_or_report(args.record, "crosscheck", "crosscheck.py",
                                                                  points, commit):
        return 2
    return 1 if failures_all else 0


def scope_points(case, py, cc, result):
    """One record point per measured scope of a case: kernels per call and GPU time on both sides."""
    points = []
    for scope in sorted(set(cc["scopes"]) & set(py["scopes"])):
        c, p = cc["scopes"][scope], py["scopes"][scope]
        points.append(dict(case, scope=scope, result=result, kernels=c["kernels_per_call"],
                           attnprof_us=c["cuda_avg_us"], python_us=p["cuda_avg_us"],
                           deviation_pct=pct(c["cuda_avg_us"], p["cuda_avg_us"])))
    return points


if __name__ == "__main__":
    sys.exit(main())
