#!/usr/bin/env python3
"""The measurement records behind BENCHMARKS.md: one JSON file per suite in docs/bench/.

A file holds the runs whose figures are current, oldest first:

  {"schema": "attnprof-bench-records/1", "suite": "forward",
   "runs": [{"commit": "cf6af8c", "date": "2026-12-01", "gpu": "NVIDIA H200",
             "driver": "580.159.04", "torch": "2.11.0+cu130", "cuda": "13.0",
             "command": "python3 scripts/bench_kernels.py --suite forward ...",
             "note": "...",                       (optional)
             "points": [{"group": "fused", "shape": "8x16x1024x64", "mask": "causal",
                         "pass": "fwd", "variant": "custom-flash-sm90",
                         "tflops": 284, "profiled_us": 58.0, "vs": 1.05, ...}]}]}

Each suite names the fields that identify a point (SUITES); a point is the
only one of its key in its file. Recording a run (record()) removes from the
older runs every point the new run measured again, and the runs left empty:
the file says the present, git keeps the rest. A figure a run did not
measure is absent, never estimated. Standard library only.

The bench scripts record through record() (their --record DIR); facts with
no script of their own are recorded from the command line:

  python3 scripts/bench_records.py check --dir docs/bench --name NAME --result TEXT --command CMD
  python3 scripts/bench_records.py ctest --dir docs/bench --log ctest.log --command CMD
  python3 scripts/bench_records.py glance --dir docs/bench --from OUT_DIR --command CMD
  python3 scripts/bench_records.py wall --dir docs/bench --times 1.13,0.88,1.02 --command CMD
  python3 scripts/bench_records.py sweep --dir docs/bench --from OUT_DIR --seconds S --command CMD

and records made elsewhere (scripts/gpu_check.sh's RECORD=1 leaves them in
work/records/ of its results tarball) join docs/bench run by run:

  python3 scripts/bench_records.py merge results_<stages>.tgz|DIR [...] [--dir docs/bench]

The commit measured comes from --commit, else $ATTNPROF_COMMIT, else git
(suffixed -dirty when tracked files outside docs/bench and BENCHMARKS.md
differ from it); a tree with none of these is refused.
"""
import argparse
import datetime
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile

SCHEMA = "attnprof-bench-records/1"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DIR = os.path.join(REPO, "docs", "bench")

# suite -> the fields that identify one of its points.
SUITES = {
    "forward": ("group", "shape", "mask", "pass", "variant"),    # bench_kernels.py --suite forward
    "shapes": ("group", "shape", "mask", "pass", "variant"),     # bench_kernels.py --suite shapes
    "backward": ("group", "shape", "mask", "pass", "variant"),   # bench_kernels.py --suite backward
    "serving": ("group", "shape", "mask", "pass", "variant"),    # bench_kernels.py --suite serving
    "fp8": ("group", "shape", "mask", "pass", "variant"),        # bench_kernels.py --suite fp8
    "op_forward": ("shape", "mask", "variant"),                  # bench_flash_sm90.py
    "op_forward_sustained": ("shape", "mask", "variant"),        # bench_flash_sm90.py --sustain
    "op_backward": ("shape", "mask", "variant"),                 # bench_flash_bwd.py
    "variants": ("shape", "mask", "pass", "dtype", "variant"),   # attnprof --variant all (at a glance)
    "ring": ("seq", "mask", "scheme", "inner", "nproc"),         # bench_ring.py
    "crosscheck": ("variant", "shape", "mask", "pass", "scope"), # crosscheck.py
    "checks": ("check",),                                         # tests and one-off checks on the GPU
}
RUN_FIELDS = ("commit", "date", "gpu", "command")  # required; driver, torch, cuda, note optional
COMMIT = re.compile(r"^[0-9a-f]{7,40}(-dirty)?$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class RecordError(Exception):
    """A record file or a run that does not follow the format; the message names the file and the field."""


def path_of(directory, suite):
    return os.path.join(directory, suite + ".json")


# Key fields that older records left out, and what they meant there.
KEY_DEFAULTS = {"scheme": "ring", "dtype": "bf16"}


def key_field(point, f):
    return point.get(f, KEY_DEFAULTS.get(f))


def key_of(suite, point):
    return tuple(key_field(point, f) for f in SUITES[suite])


def validate(doc, where):
    """Raises RecordError naming `where` and the offending field unless doc is a valid record file."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise RecordError(f"{where}: 'schema' must be {SCHEMA!r}")
    suite = doc.get("suite")
    if suite not in SUITES:
        raise RecordError(f"{where}: unknown suite {suite!r} (valid: {', '.join(SUITES)})")
    if not isinstance(doc.get("runs"), list):
        raise RecordError(f"{where}: 'runs' must be a list")
    seen = {}
    for i, run in enumerate(doc["runs"], 1):
        validate_run(suite, run, f"{where}: run {i}")
        for j, p in enumerate(run["points"], 1):
            k = key_of(suite, p)
            if k in seen:
                raise RecordError(f"{where}: run {i}, point {j}: {dict(zip(SUITES[suite], k))} is also run "
                                  f"{seen[k]}'s; a point is recorded once (the newer run replaces it)")
            seen[k] = i
    return doc


def validate_run(suite, run, where):
    if not isinstance(run, dict):
        raise RecordError(f"{where}: a run must be an object")
    for f in RUN_FIELDS:
        if not isinstance(run.get(f), str) or not run[f]:
            raise RecordError(f"{where}: '{f}' must be a non-empty string")
    if not COMMIT.match(run["commit"]):
        raise RecordError(f"{where}: commit {run['commit']!r} is not 7-40 lowercase hex digits (optionally -dirty)")
    if not DATE.match(run["date"]):
        raise RecordError(f"{where}: date {run['date']!r} is not YYYY-MM-DD")
    points = run.get("points")
    if not isinstance(points, list) or not points:
        raise RecordError(f"{where}: 'points' must be a non-empty list")
    for j, p in enumerate(points, 1):
        if not isinstance(p, dict):
            raise RecordError(f"{where}, point {j}: a point must be an object")
        for f in SUITES[suite]:
            if not isinstance(key_field(p, f), (str, int)) or isinstance(key_field(p, f), bool):
                raise RecordError(f"{where}, point {j}: '{f}' (part of the {suite} key) must be a string or integer")
        for f, v in p.items():
            if isinstance(v, float) and v != v:
                raise RecordError(f"{where}, point {j}: '{f}' is NaN (leave an unmeasured figure out)")


def load(path):
    with open(path, encoding="utf-8") as fh:
        try:
            doc = json.load(fh)
        except json.JSONDecodeError as e:
            raise RecordError(f"{path}: not valid JSON ({e})") from None
    return validate(doc, path)


def load_dir(directory):
    """suite -> record file, for every *.json in directory (each must be a valid record file)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        doc = load(path)
        if os.path.basename(path) != doc["suite"] + ".json":
            raise RecordError(f"{path}: holds suite {doc['suite']!r}; its file must be {doc['suite']}.json")
        out[doc["suite"]] = doc
    return out


def dumps(doc):
    """The file's text: one field of a run per line, one point per line (diffs show what a run changed)."""
    def one(v):
        return json.dumps(v, ensure_ascii=False)
    runs = []
    for run in doc["runs"]:
        fields = [f'   {one(k)}: {one(v)}' for k, v in run.items() if k != "points"]
        points = ",\n".join(f"    {one(p)}" for p in run["points"])
        runs.append("  {\n" + ",\n".join(fields + [f'   "points": [\n{points}\n   ]']) + "\n  }")
    head = f'{{\n "schema": {one(doc["schema"])},\n "suite": {one(doc["suite"])},\n "runs": ['
    return head + ("\n" + ",\n".join(runs) + "\n ]" if runs else "]") + "\n}\n"


def clean(value):
    """Floats rounded to 4 decimals (what a record keeps); NaN and inf dropped by the caller."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if not (isinstance(v, float) and (v != v or abs(v) == float("inf")))}
    if isinstance(value, list):
        return [clean(v) for v in value]
    return value


def add_run(doc, suite, run):
    """doc with `run` appended: its points replace the same keys of older runs, and runs left
    without points go. Pure: returns a new, validated document."""
    run = clean(dict(run))
    validate_run(suite, run, f"new {suite} run ({run.get('commit')}, {run.get('command')})")
    fresh = [key_of(suite, p) for p in run["points"]]
    if len(set(fresh)) != len(fresh):
        raise RecordError(f"new {suite} run: two points share a key ({', '.join(SUITES[suite])})")
    replaced = set(fresh)
    runs = []
    for old in doc["runs"]:
        kept = [p for p in old["points"] if key_of(suite, p) not in replaced]
        if kept:
            runs.append(dict(old, points=kept))
    return validate(dict(doc, runs=runs + [run]), f"{suite} records")


def read_or_new(directory, suite):
    if suite not in SUITES:
        raise RecordError(f"unknown suite {suite!r} (valid: {', '.join(SUITES)})")
    path = path_of(directory, suite)
    doc = load(path) if os.path.exists(path) else {"schema": SCHEMA, "suite": suite, "runs": []}
    if doc["suite"] != suite:
        raise RecordError(f"{path}: holds suite {doc['suite']!r}, not {suite!r}")
    return doc


def write(directory, doc):
    """directory/<suite>.json, replaced atomically (a temp file beside it, then a rename)."""
    os.makedirs(directory, exist_ok=True)
    path = path_of(directory, doc["suite"])
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(dumps(doc))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def record(directory, suite, run):
    """Adds `run` to directory/<suite>.json (made if missing; see add_run). Returns the path."""
    return write(directory, add_run(read_or_new(directory, suite), suite, run))


def git(*args):
    p = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def measured_commit(given=None):
    """The commit a run measures: given, else $ATTNPROF_COMMIT, else git's HEAD (-dirty if tracked
    files other than the records and the page differ from it). RecordError where none says."""
    commit = given or os.environ.get("ATTNPROF_COMMIT")
    if commit:
        commit = commit.strip().lower()
        if not COMMIT.match(commit):
            raise RecordError(f"commit {commit!r} is not 7-40 hex digits")
        return commit[:7] if not commit.endswith("-dirty") else commit[:7] + "-dirty"
    head = git("rev-parse", "--short=7", "HEAD")
    if not head:
        raise RecordError("cannot tell which commit was measured: no git here; pass --commit SHA "
                          "or set ATTNPROF_COMMIT")
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  ":(exclude)docs/bench", ":(exclude)BENCHMARKS.md")
    return head + ("-dirty" if changed else "")


def today():
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def smi(query):
    """One nvidia-smi field of GPU 0, or None where nvidia-smi cannot say."""
    try:
        p = subprocess.run(["nvidia-smi", "--id=0", f"--query-gpu={query}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = p.stdout.strip().splitlines()
    return lines[0].strip() if p.returncode == 0 and lines else None


def environment(gpu=None, torch_version=None, cuda=None):
    """gpu and driver from nvidia-smi, torch and CUDA from this Python's torch; the caller's values
    (e.g. an attnprof summary's) where those cannot say."""
    env = {"gpu": smi("name") or gpu, "driver": smi("driver_version"), "torch": torch_version, "cuda": cuda}
    try:
        import torch
        env["torch"], env["cuda"] = torch.__version__, torch.version.cuda or cuda
        if env["gpu"] is None and torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    if not env["gpu"]:
        raise RecordError("cannot tell which GPU ran: nvidia-smi and torch.cuda say nothing here")
    return {k: v for k, v in env.items() if v}


# Flags that only say where the record and copies of the results go (paths on the GPU machine).
OUTPUT_FLAGS = ("--record", "--commit", "--markdown", "--json", "--report")


def command_line(script, argv, drop=OUTPUT_FLAGS):
    """`python3 scripts/<script> ARGS`, without the flags that only say where the record and the results go."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in drop:
            skip = True
            continue
        if any(a.startswith(d + "=") for d in drop):
            continue
        out.append(a)
    return " ".join(["python3", f"scripts/{script}"] + [shlex.quote(a) for a in out])


def new_run(command, points, commit=None, note=None, env=None, fields=None):
    """A run measured here now: commit (measured_commit), today's date, this machine's environment
    (or `env`), the command, extra run fields (e.g. the shapes suite's copy ceiling), the points."""
    run = {"commit": measured_commit(commit), "date": today(), **(env or environment()), "command": command}
    if note:
        run["note"] = note
    run.update(fields or {})
    run["points"] = points
    return run


def commit_for(ap, args):
    """The commit a script's --record names (None without --record): a usage error where none can be told,
    before anything is measured."""
    if not args.record:
        return None
    try:
        return measured_commit(args.commit)
    except RecordError as e:
        ap.error(str(e))


def record_or_report(directory, suite, script, points, commit, env=None, fields=None):
    """Records `script`'s points as one run of `suite` (its command line from sys.argv): 0, or 2 with one
    line on stderr when the record cannot be made or written."""
    try:
        run = new_run(command_line(script, sys.argv[1:]), points, commit, env=env, fields=fields)
        print(f"recorded: {record(directory, suite, run)}")
        return 0
    except (RecordError, OSError) as e:
        print(f"{script.rsplit('.', 1)[0]}: {e}", file=sys.stderr)
        return 2


def shape_label(b, hq, hkv, sq, skv, d):
    """As bench_kernels.py and attnprof's at-a-glance title name a problem: 8x32/8x1/8192x128."""
    return f"{b}x{hq}" + (f"/{hkv}" if hkv != hq else "") + (f"x{sq}" if sq == skv else f"x{sq}/{skv}") + f"x{d}"


# Issue 30's causal decode points, (batch, q heads, kv heads, seq_q, seq_kv) at head_dim 128: one query per
# sequence against 4K-128K keys, and 4 queries (a speculative step) against 128K.
DECODE_SHAPES = [(8, 32, 8, 1, 4096), (8, 32, 8, 1, 32768), (8, 32, 8, 1, 131072), (1, 32, 8, 4, 131072)]


def add_record_flags(ap):
    ap.add_argument("--record", metavar="DIR",
                    help="also record this run in DIR/<suite>.json (docs/bench: what BENCHMARKS.md is made from)")
    ap.add_argument("--commit", help="with --record: the commit measured (default: $ATTNPROF_COMMIT, else git)")


# --- facts recorded from the command line ---------------------------------------------------------

def parse_ctest_log(text):
    """'P of N passed, S skipped, F failed: names' from ctest's output."""
    # CMake 3 always names the failures; CMake 4 leaves "0 tests failed" out.
    m = re.search(r"(\d+)% tests passed, (\d+) tests? failed out of (\d+)", text)
    m4 = re.search(r"(\d+)% tests passed out of (\d+)", text)
    if m:
        failed, total = int(m.group(2)), int(m.group(3))
    elif m4:
        failed, total = 0, int(m4.group(2))
    else:
        raise RecordError("the ctest log has no 'N% tests passed[, F tests failed] out of M' line")
    skipped = len(re.findall(r"\(Skipped\)", text.split("tests passed")[-1]))
    names = re.findall(r"^\s*\d+ - (\S+) \((?:Failed|Timeout|SEGFAULT|Subprocess aborted)\)", text, re.M)
    # ctest counts a skipped test among the passed ones; here they are apart.
    result = f"{total - failed - skipped} of {total} passed"
    if skipped:
        result += f", {skipped} skipped"
    if failed:
        result += f", {failed} failed" + (": " + ", ".join(names) if names else "")
    return result


def glance_points(out_dir):
    """One point per variant of each at-a-glance table in OUT_DIR/compare/, the problem read from a summary."""
    points = []
    for table in sorted(glob.glob(os.path.join(out_dir, "compare", "*.json"))):
        stem = os.path.basename(table)[:-len(".json")]
        if stem.endswith(".trace"):
            continue
        summaries = glob.glob(os.path.join(out_dir, "*", stem + ".summary.json"))
        if not summaries:
            raise RecordError(f"{table}: no {stem}.summary.json beside it to say the problem")
        with open(summaries[0]) as fh:
            pr = json.load(fh)["problem"]
        with open(table) as fh:
            rows = json.load(fh)
        for r in rows:
            p = {"shape": shape_label(pr["batch"], pr["heads_q"], pr["heads_kv"], pr["seq_q"], pr["seq_kv"],
                                      pr["head_dim"]),
                 "mask": pr["mask"], "pass": pr["pass"], "dtype": pr.get("dtype", "bf16"), "variant": r["variant"],
                 "status": r["status"]}
            for src, dst in (("kernels_per_fwd", "kernels"), ("kernels_per_step", "kernels"),
                             ("gpu_time_profiled_us", "profiled_us"), ("gpu_time_event_median_us", "median_us"),
                             ("cpu_time_us", "cpu_us"), ("speedup_vs_naive", "vs"), ("tflops", "tflops"),
                             ("pct_of_peak", "pct_of_peak")):
                if r.get(src) is not None:
                    p[dst] = r[src]
            if r["status"] != "ok" and r.get("note"):
                p["reason"] = r["note"]
            points.append(p)
    if not points:
        raise RecordError(f"{out_dir}/compare holds no at-a-glance table (run attnprof --variant all --out {out_dir})")
    return points


def sweep_result(out_dir, seconds=None):
    """'84 configurations: 82 ran, 2 skipped, 0 failed' from OUT_DIR/sweep/sweep.json."""
    with open(os.path.join(out_dir, "sweep", "sweep.json")) as fh:
        rows = json.load(fh)
    counts = {}
    for r in rows:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    ran, skipped = counts.pop("ok", 0), counts.pop("skipped", 0)
    other = sum(counts.values())
    text = f"{len(rows)} configurations: {ran} ran, {skipped} skipped, {other} failed"
    return text + (f"; {seconds:.0f} s" if seconds is not None else "")


def incoming(source):
    """(name, record file) of every record file in SOURCE: a directory of <suite>.json, or a
    tarball whose members named records/<suite>.json hold them (gpu_check.sh's results_*.tgz)."""
    found = []
    if not os.path.exists(source):
        raise RecordError(f"{source}: no such file or directory")
    if os.path.isdir(source):
        for path in sorted(glob.glob(os.path.join(source, "*.json"))):
            found.append((path, load(path)))
    elif tarfile.is_tarfile(source):
        with tarfile.open(source) as tar:
            for m in sorted(tar.getmembers(), key=lambda m: m.name):
                parts = m.name.split("/")
                if m.isfile() and len(parts) >= 2 and parts[-2] == "records" and parts[-1].endswith(".json"):
                    where = f"{source}:{m.name}"
                    try:
                        doc = json.load(tar.extractfile(m))
                    except json.JSONDecodeError as e:
                        raise RecordError(f"{where}: not valid JSON ({e})") from None
                    found.append((where, validate(doc, where)))
    else:
        raise RecordError(f"{source}: neither a directory of records nor a tarball")
    if not found:
        raise RecordError(f"{source}: holds no record files (records/<suite>.json)")
    return found


def merge(sources, directory):
    """Every run of every incoming record file, oldest first within its file, added to directory's
    records; all of them read, added and validated before any file is written."""
    docs = {}
    for _, doc in [f for src in sources for f in incoming(src)]:
        suite = doc["suite"]
        target = docs.get(suite) or read_or_new(directory, suite)
        for run in doc["runs"]:
            target = add_run(target, suite, run)
        docs[suite] = target
    return [write(directory, docs[suite]) for suite in sorted(docs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", default=DEFAULT_DIR, help="the records (default docs/bench)")
    common.add_argument("--command", required=True, help="the command that was measured, as run")
    common.add_argument("--commit", help="the commit measured (default: $ATTNPROF_COMMIT, else git)")
    common.add_argument("--note")
    common.add_argument("--gpus", type=int, default=1, help="GPUs the command used (the run's gpu says 'N x <name>')")
    c = sub.add_parser("check", parents=[common], help="one check's result (checks.json)")
    c.add_argument("--name", required=True)
    c.add_argument("--result", required=True)
    t = sub.add_parser("ctest", parents=[common], help="ctest's totals from its log (checks.json)")
    t.add_argument("--log", required=True)
    t.add_argument("--name", default="ctest on the GPU machine")
    g = sub.add_parser("glance", parents=[common], help="attnprof --variant all's at-a-glance tables (variants.json)")
    g.add_argument("--from", dest="out_dir", required=True, help="the run's --out directory")
    w = sub.add_parser("wall", parents=[common], help="wall times of one command (checks.json)")
    w.add_argument("--times", required=True, help="comma-separated seconds")
    w.add_argument("--name", default="wall time of the README's first command")
    sw = sub.add_parser("sweep", parents=[common], help="a sweep's outcome from its sweep.json (checks.json)")
    sw.add_argument("--from", dest="out_dir", required=True, help="the sweep's --out directory")
    sw.add_argument("--seconds", type=float, help="its wall time")
    sw.add_argument("--name", default="sweep")
    m = sub.add_parser("merge", help="add the runs of record files made elsewhere (directories or tarballs)")
    m.add_argument("sources", nargs="+")
    m.add_argument("--dir", default=DEFAULT_DIR, help="the records (default docs/bench)")
    args = ap.parse_args()
    try:
        if args.what == "merge":
            for path in merge(args.sources, args.dir):
                print(path)
            return 0
        if args.what == "check":
            suite, points = "checks", [{"check": args.name, "result": args.result}]
        elif args.what == "ctest":
            with open(args.log, errors="replace") as fh:
                suite, points = "checks", [{"check": args.name, "result": parse_ctest_log(fh.read())}]
        elif args.what == "sweep":
            suite, points = "checks", [{"check": args.name, "result": sweep_result(args.out_dir, args.seconds)}]
        elif args.what == "wall":
            try:
                times = [float(x) for x in args.times.split(",") if x.strip()]
            except ValueError:
                ap.error(f"--times {args.times!r}: expected comma-separated seconds, e.g. 1.13,0.88")
            if not times:
                ap.error("--times: give at least one time")
            suite = "checks"
            points = [{"check": args.name, "result": ", ".join(f"{t:.2f} s" for t in times), "wall_s": times}]
        else:
            suite, points = "variants", glance_points(args.out_dir)
        env = environment()
        if args.gpus > 1:
            env["gpu"] = f"{args.gpus} x {env['gpu']}"
        print(record(args.dir, suite, new_run(args.command, points, args.commit, args.note, env=env)))
    except (RecordError, OSError, KeyError, ValueError, tarfile.TarError) as e:
        print(f"bench_records: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
