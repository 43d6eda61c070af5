#!/usr/bin/env python3
"""Builds the Hopper attention operator with another tile configuration as a
separate library, for timing configurations side by side in one process.

  python3 scripts/build_sm90_alt.py NAME -DATTNPROF_SM90_D128_BLOCK_N=176 [...]
  -> build-sm90alt/NAME/libattnprof_sm90_NAME.so, operators
     torch.ops.attnprof_NAME.flash_attention_sm90 (scripts/bench_flash_sm90.py --alt)
     and torch.ops.attnprof_NAME.flash_attention_backward_sm90 (scripts/bench_flash_bwd.py --alt)

Reuses the compile commands of the main build (build/compile_commands.json,
scripts/setup.sh first) for src/kernels/flash_sm90/*.cu and
src/kernels/ops_sm90.cpp, adds the macros, renames the C++ namespace
(flash_sm90 -> flash_sm90_NAME) so the libraries' symbols cannot collide, and
links against LibTorch the way attnprof_core does, and against attnprof_core
itself for what the backward shares with the portable kernels (its
preprocessing, dQ conversion and operator boundary).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name", help="letters, digits, _ (part of the library and operator names)")
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--out", default=str(ROOT / "build-sm90alt"))
    ap.add_argument("-j", type=int, default=2)
    args, args.defines = ap.parse_known_args()  # the rest: -DMACRO=VALUE for flash_sm90_traits.h
    if not re.fullmatch(r"[A-Za-z0-9_]+", args.name):
        sys.exit("name: letters, digits and _ only")
    for d in args.defines:
        if not d.startswith("-D"):
            sys.exit(f"not a -D define: {d}")

    out = Path(args.out) / args.name
    out.mkdir(parents=True, exist_ok=True)
    extra = [f"-Dflash_sm90=flash_sm90_{args.name}", f"-DATTNPROF_SM90_ALT_LIBRARY=attnprof_{args.name}"] + args.defines
    commands = json.load(open(Path(args.build) / "compile_commands.json"))
    jobs = []
    for c in commands:
        f = c["file"]
        if not (re.search(r"src/kernels/flash_sm90/[^/]+\.cu$", f) or f.endswith("src/kernels/ops_sm90.cpp")):
            continue
        argv = shlex.split(c["command"])
        o = argv.index("-o")
        obj = out / (Path(f).name + ".o")
        argv[o + 1] = str(obj)
        argv[1:1] = extra
        jobs.append((c["directory"], argv, obj, f))
    if len(jobs) < 2:
        sys.exit(f"no sm90 sources in {args.build}/compile_commands.json (configure with the CUDA kernels)")

    def compile_one(job):
        cwd, argv, obj, f = job
        p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        return f, p.returncode, p.stdout + p.stderr

    failed = False
    with ThreadPoolExecutor(args.j) as ex:
        for f, rc, log in ex.map(compile_one, jobs):
            for line in log.splitlines():
                if re.search(r"error|C75\d\d|spill|Used \d+ registers", line):
                    print(f"{Path(f).name}: {line.strip()}")
            failed |= rc != 0
    if failed:
        sys.exit("compile failed")

    # Link like attnprof_core (its LINK_LIBRARIES in build.ninja), minus the report library.
    ninja = open(Path(args.build) / "build.ninja").read()
    m = re.search(r"build libattnprof_core\.so:.*?\n(?:\s+\w+ = .*\n)*?\s+LINK_LIBRARIES = (.*)\n", ninja)
    libs = [a for a in shlex.split(m.group(1)) if "attnprof_report" not in a] if m else []
    lib = out / f"libattnprof_sm90_{args.name}.so"
    objs = [str(j[2]) for j in jobs]
    core = Path(args.build).resolve() / "libattnprof_core.so"
    p = subprocess.run(["g++", "-shared", "-o", str(lib)] + objs + [str(core), f"-Wl,-rpath,{core.parent}"] + libs,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("link failed:\n" + p.stderr[-3000:])
    print(f"built {lib} (operators attnprof_{args.name}::flash_attention_sm90, ::flash_attention_backward_sm90)")


if __name__ == "__main__":
    main()
