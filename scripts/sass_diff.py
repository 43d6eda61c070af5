#!/usr/bin/env python3
"""Compare the device code (SASS) of the CUDA objects of a base commit and the work tree.

Usage:
  scripts/sass_diff.py --base COMMIT [--objects GLOB] [--compile-commands PATH]
                       [--scratch DIR] [--jobs N]

Each .cu entry of build/compile_commands.json (or --compile-commands) whose
source path, relative to the source root, matches GLOB (fnmatch, default
'*.cu'; e.g. 'src/kernels/flash_sm90/*') is compiled twice with the same
nvcc command: once from `git archive COMMIT` unpacked under the scratch
directory, once from the work tree. Only the paths of the source tree are
rewritten (the LibTorch and CUDA include paths and the flags stay as they
are); the object goes to the scratch directory. `cuobjdump -sass` of both
objects is split per (architecture, kernel) and compared line by line, with
the `identifier = <source path>` header lines left out (the only lines that
carry a path) and the path hash in anonymous-namespace names folded to <anon>. The ptxas -v resource lines (registers, stack, spill bytes)
are compared as well and any spill bytes are reported.

Prints one line per kernel (identical / different / only in base / only in
tree) and exits 1 on any difference, 0 when everything matched. Base objects
are kept under SCRATCH/base-<commit> and reused on a later run of the same
commit; the work tree is always compiled again.
"""

import argparse
import concurrent.futures
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def find_cuobjdump(root: Path):
    tools = root / "build" / "tools"
    if tools.is_dir():
        for p in sorted(tools.rglob("cuobjdump")):
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return shutil.which("cuobjdump")


def unpack(repo: Path, commit: str, dest: Path):
    if (dest / ".sass_diff_complete").exists():
        return
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "-C", str(repo), "archive", commit], stdout=tar, check=True)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(dest)
    (dest / ".sass_diff_complete").write_text(commit + "\n")


def rewrite(command: str, root: str, tree: str, source_rel: str, obj: Path):
    """The entry's command for `tree` instead of `root`, writing `obj`."""
    # Source-tree paths only: root/.venv (LibTorch headers) and root/build stay.
    pattern = re.compile(re.escape(root) + r"/(?!\.venv/|build/)")
    args = [pattern.sub(tree + "/", a) for a in shlex.split(command)]
    if "-o" not in args:
        raise SystemExit(f"no -o in the command for {source_rel}")
    args[args.index("-o") + 1] = str(obj)
    return args


def compile_one(args, cwd: Path, log: Path):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    log.write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed ({r.returncode}), see {log}")
    return r.stdout + r.stderr


# Names in an anonymous namespace carry a hash of the source path
# (57_GLOBAL__N__01574701_24_scaled_masked_softmax_cu_74089f8d): one token.
ANON = re.compile(r"\d+_GLOBAL__N__[0-9A-Za-z_]+?_[0-9a-f]{8}(?=\d)")


def sass_by_kernel(cuobjdump: str, obj: Path):
    out = subprocess.run([cuobjdump, "-sass", str(obj)], check=True, capture_output=True, text=True).stdout
    out = ANON.sub("<anon>", out)
    kernels = {}
    arch, current = "?", None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("identifier ="):  # the source path
            continue
        m = re.match(r"arch = (\S+)", s)
        if m:
            arch, current = m.group(1), None
            continue
        m = re.match(r"Function : (\S+)", s)
        if m:
            current = (arch, m.group(1))
            kernels[current] = []
            continue
        if current is not None and s:
            kernels[current].append(s)
    return kernels


def ptxas_resources(log: str):
    """{(arch, function): [resource lines]} from the ptxas -v output."""
    res = {}
    key = None
    for line in ANON.sub("<anon>", log).splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for '([^']+)'", line)
        if m:
            key = (m.group(2), m.group(1))
            res[key] = []
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            continue
        if key is not None and ("bytes stack frame" in line or "Used " in line):
            res[key].append(line.strip())
    return res


def spill_bytes(lines):
    total = 0
    for ln in lines:
        for m in re.finditer(r"(\d+) bytes spill (?:stores|loads)", ln):
            total += int(m.group(1))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="commit to compare against")
    ap.add_argument("--objects", default="*.cu", help="fnmatch glob on the source path relative to the source root")
    ap.add_argument("--compile-commands", help="default: <main work tree>/build/compile_commands.json")
    ap.add_argument("--source-root", help="the source tree the compile commands name (default: the build directory's parent)")
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "sass_diff"), help="scratch directory")
    ap.add_argument("--jobs", type=int, default=2, help="parallel nvcc runs (default 2)")
    args = ap.parse_args()

    tree = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
    # The main work tree holds build/ (a linked work tree usually has none).
    common = Path(git(tree, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    cc = Path(args.compile_commands) if args.compile_commands else tree / "build" / "compile_commands.json"
    if not cc.exists() and not args.compile_commands:
        cc = common.parent / "build" / "compile_commands.json"
    entries = [e for e in json.loads(cc.read_text()) if e["file"].endswith(".cu")]
    if not entries:
        raise SystemExit(f"no .cu entries in {cc}")
    root = args.source_root or str(Path(entries[0]["directory"]).parent)
    cuobjdump = find_cuobjdump(Path(root))
    if not cuobjdump:
        raise SystemExit("cuobjdump not found (build/tools or PATH)")

    picked = []
    for e in entries:
        rel = os.path.relpath(e["file"], root)
        if rel.startswith("..") or not fnmatch.fnmatch(rel, args.objects):
            continue
        picked.append((rel, e))
    if not picked:
        raise SystemExit(f"no .cu entry matches {args.objects!r}")

    commit = git(tree, "rev-parse", "--verify", args.base + "^{commit}")
    scratch = Path(args.scratch)
    base_src = scratch / f"base-{commit[:12]}" / "src-tree"
    unpack(tree, commit, base_src)
    print(f"base {commit[:12]} ({base_src}), tree {tree}, {len(picked)} objects, cuobjdump {cuobjdump}")

    jobs = []
    for rel, e in picked:
        name = rel.replace("/", "__")
        for side, src in (("base", base_src), ("tree", tree)):
            out_dir = scratch / (f"base-{commit[:12]}" if side == "base" else "tree") / "obj"
            out_dir.mkdir(parents=True, exist_ok=True)
            obj = out_dir / (name + ".o")
            log = out_dir / (name + ".log")
            reuse = side == "base" and obj.exists() and log.exists()
            jobs.append((rel, side, obj, log, reuse, rewrite(e["command"], root, str(src), rel, obj)))

    logs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        futs = {}
        for rel, side, obj, log, reuse, cmd in jobs:
            if reuse:
                logs[(rel, side)] = log.read_text()
                continue
            if obj.exists():
                obj.unlink()
            futs[pool.submit(compile_one, cmd, obj.parent, log)] = (rel, side)
        for f in concurrent.futures.as_completed(futs):
            rel, side = futs[f]
            logs[(rel, side)] = f.result()
            print(f"  compiled {side}: {rel}", flush=True)

    objs = {(rel, side): obj for rel, side, obj, *_ in jobs}
    differ = 0
    compared = 0
    spills = []
    for rel, _ in picked:
        a = sass_by_kernel(cuobjdump, objs[(rel, "base")])
        b = sass_by_kernel(cuobjdump, objs[(rel, "tree")])
        ra = ptxas_resources(logs[(rel, "base")])
        rb = ptxas_resources(logs[(rel, "tree")])
        print(f"{rel}:")
        for key in sorted(set(a) | set(b)):
            arch, fn = key
            if key not in a or key not in b:
                state = "only in base" if key in a else "only in tree"
                differ += 1
            else:
                compared += 1
                same = a[key] == b[key]
                res_same = ra.get(key) == rb.get(key)
                state = "identical" if same else f"different SASS ({len(a[key])} vs {len(b[key])} lines)"
                if same and not res_same:
                    state = "identical SASS, different ptxas resources"
                if not (same and res_same):
                    differ += 1
            s = spill_bytes(rb.get(key, []))
            if s:
                spills.append((rel, key, s))
            print(f"  {arch:7} {state:12}  {fn}" + (f"  [{s} spill bytes]" if s else ""))
    print(f"{compared} kernels compared, {differ} with differences, "
          f"{len(spills)} with spill bytes in the tree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
