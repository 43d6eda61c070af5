#!/usr/bin/env python3
"""Compare the device code (SASS) of every CUDA kernel of a base commit and the work tree.

Usage:
  scripts/sass_diff.py --base COMMIT [--build build] [--scratch DIR] [--jobs N] [--cmake-arg -DX=Y ...]

The base (`git archive COMMIT`) is configured with CMake in the scratch
directory, with the LibTorch and nvcc of --build, and only its CUDA objects
are built; the work tree's CUDA objects are those of --build (brought up to
date there). So files that moved, were split or are generated (one object per
kernel configuration) are all compiled as their own commit builds them. `cuobjdump -sass` of every object is split per
(architecture, kernel), with the `identifier = <source path>` lines left out
the path hash in anonymous-namespace names folded to <anon>, and runs of
spaces (cuobjdump pads its columns to the object's longest line) folded to one.

Kernels are paired by name; a kernel whose name changed (its configuration
struct renamed, template arguments spelled differently) is paired with the
kernel of identical SASS on the other side and reported as renamed. The
resource usage of each pair (cuobjdump -res-usage: registers, stack, shared
and local memory) is compared as well, and any stack or local memory (spills)
in the tree is reported.

Prints one line per kernel (identical / renamed / different / only in base /
only in tree) and exits 1 on any difference, 0 when every kernel of either
side has an identical twin. The base build is kept under
SCRATCH/base-<commit> and reused by a later run against the same commit.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
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


def cache_value(build: Path, key: str):
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(key + ":"):
            return line.split("=", 1)[1]
    return ""


def configure(src: Path, build: Path, cmake_args, log: Path):
    build.mkdir(parents=True, exist_ok=True)
    gen = ["-G", "Ninja"] if not (build / "Makefile").exists() else []
    r = subprocess.run(["cmake", "-S", str(src), "-B", str(build), *gen, "-DCMAKE_BUILD_TYPE=Release",
                        "-DATTNPROF_TESTS=OFF", *cmake_args], capture_output=True, text=True)
    log.write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"configuring {src} failed, see {log}")


def build_cuda_objects(src: Path, build: Path, jobs: int, log: Path):
    """Builds the CUDA objects of the configured `build` (of `src`), returns their paths."""
    targets = subprocess.run(["ninja", "-C", str(build), "-t", "targets", "all"], check=True,
                             capture_output=True, text=True).stdout
    objects = sorted({t.split(":")[0] for t in targets.splitlines() if t.split(":")[0].endswith(".cu.o")})
    if not objects:
        raise SystemExit(f"{src} builds no CUDA objects (no nvcc at configure time?)")
    r = subprocess.run(["ninja", "-C", str(build), f"-j{jobs}", *objects], capture_output=True, text=True)
    with open(log, "a") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"building the CUDA objects of {src} failed, see {log}")
    return [build / o for o in objects]


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
            # Column padding depends on the longest line of the object: spaces folded.
            kernels[current].append(" ".join(s.split()))
    return kernels


def resources(cuobjdump: str, obj: Path):
    """{(arch, function): 'REG:n STACK:n SHARED:n LOCAL:n ...'} from cuobjdump -res-usage."""
    out = subprocess.run([cuobjdump, "-res-usage", str(obj)], check=True, capture_output=True, text=True).stdout
    out = ANON.sub("<anon>", out)
    res, arch, fn = {}, "?", None
    for line in out.splitlines():
        m = re.search(r"arch = (\S+)", line)
        if m:
            arch = m.group(1)
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        if fn and "REG:" in line:
            res[(arch, fn)] = line.strip()
            fn = None
    return res


def side_kernels(cuobjdump, objects):
    sass, res = {}, {}
    for obj in objects:
        sass.update(sass_by_kernel(cuobjdump, obj))
        res.update(resources(cuobjdump, obj))
    return sass, res


def local_bytes(usage: str):
    m = re.search(r"STACK:(\d+).*LOCAL:(\d+)", usage or "")
    return (int(m.group(1)) + int(m.group(2))) if m else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="commit to compare against")
    ap.add_argument("--build", default="build", help="the configured build whose LibTorch and nvcc both sides use")
    ap.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "sass_diff"), help="scratch directory")
    ap.add_argument("--jobs", type=int, default=2, help="parallel nvcc runs (default 2)")
    ap.add_argument("--cmake-arg", action="append", default=[], help="extra -D option for both sides")
    args = ap.parse_args()

    tree = Path(git(Path.cwd(), "rev-parse", "--show-toplevel"))
    build = Path(args.build) if Path(args.build).is_absolute() else tree / args.build
    if not (build / "CMakeCache.txt").exists():
        raise SystemExit(f"{build} is not a configured build (run scripts/setup.sh first)")
    cuobjdump = find_cuobjdump(tree)
    if not cuobjdump:
        raise SystemExit("cuobjdump not found (build/tools or PATH)")
    cmake_args = [f"-DCMAKE_PREFIX_PATH={cache_value(build, 'CMAKE_PREFIX_PATH')}",
                  f"-DCMAKE_CUDA_COMPILER={cache_value(build, 'CMAKE_CUDA_COMPILER')}", *args.cmake_arg]

    commit = git(tree, "rev-parse", "--verify", args.base + "^{commit}")
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    base_dir = scratch / f"base-{commit[:12]}"
    unpack(tree, commit, base_dir / "src-tree")
    print(f"base {commit[:12]} ({base_dir}), tree {tree}, cuobjdump {cuobjdump}", flush=True)
    sides = {}
    # The work tree's objects are those of --build (built there if stale).
    configure(base_dir / "src-tree", base_dir / "build", cmake_args, scratch / "base.configure.log")
    for side, src, out in (("base", base_dir / "src-tree", base_dir / "build"), ("tree", tree, build)):
        objs = build_cuda_objects(src, out, args.jobs, scratch / f"{side}.log")
        sides[side] = side_kernels(cuobjdump, objs)
        print(f"  {side}: {len(objs)} objects, {len(sides[side][0])} kernels", flush=True)

    (a, ra), (b, rb) = sides["base"], sides["tree"]
    pairs, only_a, only_b = [], [k for k in a if k not in b], [k for k in b if k not in a]
    pairs += [(k, k) for k in a if k in b]
    # Renamed kernels: the same SASS under another name, in the same architecture.
    by_body = defaultdict(list)
    for k in only_b:
        by_body[(k[0], tuple(b[k]))].append(k)
    still_a = []
    for k in only_a:
        twins = by_body.get((k[0], tuple(a[k])))
        if twins:
            pairs.append((k, twins.pop(0)))
        else:
            still_a.append(k)
    paired_b = {kb for _, kb in pairs}
    still_b = [k for k in only_b if k not in paired_b]

    differ, spills = 0, []
    for ka, kb in sorted(pairs):
        same = a[ka] == b[kb]
        res_same = ra.get(ka) == rb.get(kb)
        state = "identical" if ka == kb else "renamed"
        if not same:
            state = f"different SASS ({len(a[ka])} vs {len(b[kb])} lines)"
        elif not res_same:
            state = f"identical SASS, different resources ({ra.get(ka)} vs {rb.get(kb)})"
        if not (same and res_same):
            differ += 1
        s = local_bytes(rb.get(kb))
        if s:
            spills.append(kb)
        print(f"  {ka[0]:7} {state:10}  {ka[1]}" + ("" if ka == kb else f"\n  {'':7} {'':10}  -> {kb[1]}") +
              (f"  [{s} stack/local bytes]" if s else ""))
    for k in still_a:
        differ += 1
        print(f"  {k[0]:7} only in base  {k[1]}")
    for k in still_b:
        differ += 1
        print(f"  {k[0]:7} only in tree  {k[1]}")
    print(f"{len(pairs)} kernels paired ({sum(1 for x, y in pairs if x != y)} renamed), {differ} with differences, "
          f"{len(spills)} with stack or local memory in the tree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
