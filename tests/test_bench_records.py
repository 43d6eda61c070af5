#!/usr/bin/env python3
"""BENCHMARKS.md's records (scripts/bench_records.py) and the page made from them
(scripts/benchmarks_md.py), without a GPU: recording replaces what a run measured
again, malformed records are refused naming the field, merging is all or nothing,
and bench_kernels.py --record (run against a stand-in attnprof that writes
summaries) records what its table printed."""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import bench_records as br  # noqa: E402
import benchmarks_md as md  # noqa: E402


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def run(commit, points, date="2026-12-01", command="python3 scripts/bench_kernels.py --suite forward"):
    return {"commit": commit, "date": date, "gpu": "NVIDIA H200", "command": command, "points": points}


def fwd(variant, shape="8x16x1024x64", mask="causal", **figures):
    return dict({"group": "fused", "shape": shape, "mask": mask, "pass": "fwd", "variant": variant}, **figures)


class Records(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_new_run_replaces_the_points_it_measured_again_and_drops_emptied_runs(self):
        br.record(self.dir, "forward", run("aaaaaaa", [fwd("custom-flash", tflops=230), fwd("sdpa-flash", tflops=170)]))
        br.record(self.dir, "forward", run("bbbbbbb", [fwd("custom-flash-sm90", tflops=280)]))
        br.record(self.dir, "forward", run("ccccccc", [fwd("custom-flash", tflops=240), fwd("custom-flash-sm90", tflops=290)]))
        doc = br.load(br.path_of(self.dir, "forward"))
        got = [(r["commit"], [(p["variant"], p["tflops"]) for p in r["points"]]) for r in doc["runs"]]
        self.assertEqual(got, [("aaaaaaa", [("sdpa-flash", 170)]),
                               ("ccccccc", [("custom-flash", 240), ("custom-flash-sm90", 290)])])
        # The file is what dumps() writes, and reads back to the same document.
        self.assertEqual(read(br.path_of(self.dir, "forward")), br.dumps(doc))
        self.assertEqual([f for f in os.listdir(self.dir)], ["forward.json"])  # no temp left

    def test_floats_are_kept_to_four_decimals_and_nan_refused(self):
        br.record(self.dir, "forward", run("aaaaaaa", [fwd("custom-flash", median_us=73.123456789)]))
        p = br.load(br.path_of(self.dir, "forward"))["runs"][0]["points"][0]
        self.assertEqual(p["median_us"], 73.1235)
        with self.assertRaisesRegex(br.RecordError, "'vs' is NaN"):
            br.validate_run("forward", run("aaaaaaa", [fwd("x", vs=float("nan"))]), "run")

    def test_malformed_records_are_refused_naming_the_field(self):
        cases = [
            ({"commit": "xyz"}, "commit 'xyz' is not 7-40"),
            ({"date": "1 Dec 2026"}, "date '1 Dec 2026' is not YYYY-MM-DD"),
            ({"gpu": ""}, "'gpu' must be a non-empty string"),
            ({"points": []}, "'points' must be a non-empty list"),
            ({"points": [{"group": "fused", "shape": "8x16x1024x64", "mask": "causal", "pass": "fwd"}]},
             "'variant' \\(part of the forward key\\)"),
        ]
        for change, message in cases:
            with self.subTest(change=change):
                with self.assertRaisesRegex(br.RecordError, message):
                    br.record(self.dir, "forward", dict(run("aaaaaaa", [fwd("v")]), **change))
        self.assertFalse(os.path.exists(br.path_of(self.dir, "forward")))  # nothing written
        with self.assertRaisesRegex(br.RecordError, "two points share a key"):
            br.record(self.dir, "forward", run("aaaaaaa", [fwd("v"), fwd("v")]))
        doc = {"schema": br.SCHEMA, "suite": "forward",
               "runs": [run("aaaaaaa", [fwd("v")]), run("bbbbbbb", [fwd("v")])]}
        with self.assertRaisesRegex(br.RecordError, "is also run 1's"):
            br.validate(doc, "f.json")
        with self.assertRaisesRegex(br.RecordError, "unknown suite 'speed'"):
            br.validate(dict(doc, suite="speed"), "f.json")

    def test_a_record_file_must_be_named_after_its_suite(self):
        br.record(self.dir, "forward", run("aaaaaaa", [fwd("v")]))
        os.rename(br.path_of(self.dir, "forward"), os.path.join(self.dir, "shapes.json"))
        with self.assertRaisesRegex(br.RecordError, "its file must be forward.json"):
            br.load_dir(self.dir)

    def test_merge_from_a_results_tarball_is_all_or_nothing(self):
        br.record(self.dir, "forward", run("aaaaaaa", [fwd("custom-flash", tflops=230), fwd("sdpa-flash", tflops=170)]))
        before = read(br.path_of(self.dir, "forward"))
        good = {"schema": br.SCHEMA, "suite": "forward", "runs": [run("bbbbbbb", [fwd("custom-flash", tflops=250)])]}
        bad = {"schema": br.SCHEMA, "suite": "checks", "runs": [dict(run("bbbbbbb", [{"check": "x", "result": "y"}]),
                                                                     date="today")]}
        tgz = os.path.join(self.dir, "results_test.tgz")

        def tarball(files):
            with tarfile.open(tgz, "w:gz") as tar:
                for name, doc in files.items():
                    data = json.dumps(doc).encode()
                    info = tarfile.TarInfo(f"work/records/{name}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))

        tarball({"forward.json": good, "checks.json": bad})
        with self.assertRaisesRegex(br.RecordError, "date 'today'"):
            br.merge([tgz], self.dir)
        self.assertEqual(read(br.path_of(self.dir, "forward")), before)
        self.assertFalse(os.path.exists(br.path_of(self.dir, "checks")))
        tarball({"forward.json": good})
        br.merge([tgz], self.dir)
        doc = br.load(br.path_of(self.dir, "forward"))
        self.assertEqual([(r["commit"], [p["variant"] for p in r["points"]]) for r in doc["runs"]],
                         [("aaaaaaa", ["sdpa-flash"]), ("bbbbbbb", ["custom-flash"])])

    def test_ctest_log_and_sweep_outcome(self):
        log = textwrap.dedent("""\
            1/3 Test #1: A.x ...   Passed    0.01 sec
            2/3 Test #2: B.y ...***Skipped   0.01 sec
            3/3 Test #3: C.z ...***Failed    0.02 sec

            67% tests passed, 1 tests failed out of 3

            The following tests did not run:
            \t  2 - B.y (Skipped)

            The following tests FAILED:
            \t  3 - C.z (Failed)
            """)
        self.assertEqual(br.parse_ctest_log(log), "1 of 3 passed, 1 skipped, 1 failed: C.z")
        # CMake 4 says no "0 tests failed" when none did.
        cmake4 = "1/2 Test #1: A.x ...   Passed\n2/2 Test #2: B.y ...***Skipped\n\n100% tests passed out of 2\n" \
                 "\nThe following tests did not run:\n\t  2 - B.y (Skipped)\n"
        self.assertEqual(br.parse_ctest_log(cmake4), "1 of 2 passed, 1 skipped")
        with self.assertRaisesRegex(br.RecordError, "no 'N% tests passed"):
            br.parse_ctest_log("Test project /x\nNo tests were found!!!\n")
        os.makedirs(os.path.join(self.dir, "sweep"))
        with open(os.path.join(self.dir, "sweep", "sweep.json"), "w") as fh:
            json.dump([{"status": "ok"}] * 3 + [{"status": "skipped"}, {"status": "failed"}], fh)
        self.assertEqual(br.sweep_result(self.dir, 47.2), "5 configurations: 3 ran, 1 skipped, 1 failed; 47 s")

    def test_at_a_glance_tables_become_points_with_their_problem(self):
        out = os.path.join(self.dir, "out")
        stem = "8_32_1_128_bf16_causal_hkv8_kv8192"
        os.makedirs(os.path.join(out, "compare"))
        os.makedirs(os.path.join(out, "naive"))
        with open(os.path.join(out, "naive", stem + ".summary.json"), "w") as fh:
            json.dump({"problem": {"batch": 8, "heads_q": 32, "heads_kv": 8, "seq_q": 1, "seq_kv": 8192,
                                   "head_dim": 128, "mask": "causal", "pass": "fwd"}}, fh)
        with open(os.path.join(out, "compare", stem + ".json"), "w") as fh:
            json.dump([{"variant": "naive", "status": "ok", "kernels_per_fwd": 9, "gpu_time_profiled_us": 1417.0,
                        "gpu_time_event_median_us": 1385.6, "cpu_time_us": 527.7, "speedup_vs_naive": 1.0,
                        "tflops": 0.758, "pct_of_peak": 0.08, "note": "DtoD Memcpy present"},
                       {"variant": "sdpa-efficient", "status": "skipped", "kernels_per_fwd": None,
                        "note": "skipped: no kernel"}], fh)
        pts = br.glance_points(out)
        self.assertEqual(pts[0], {"shape": "8x32/8x1/8192x128", "mask": "causal", "pass": "fwd", "dtype": "bf16",
                                  "variant": "naive", "status": "ok", "kernels": 9, "profiled_us": 1417.0, "median_us": 1385.6,
                                  "cpu_us": 527.7, "vs": 1.0, "tflops": 0.758, "pct_of_peak": 0.08})
        self.assertEqual(pts[1]["reason"], "skipped: no kernel")
        self.assertNotIn("kernels", pts[1])

    def test_an_fp8_glance_keeps_the_bf16_points_of_its_problem(self):
        bf16 = {"shape": "4x16x4096x128", "mask": "causal", "pass": "fwd", "variant": "sdpa-cudnn", "status": "ok",
                "median_us": 475.4}  # recorded before points carried a dtype: bf16
        fp8 = dict(bf16, dtype="fp8", status="skipped", reason="no fp8 path")
        doc = {"schema": br.SCHEMA, "suite": "variants", "runs": []}
        for commit, p in (("aaaaaaa", bf16), ("bbbbbbb", fp8)):
            doc = br.add_run(doc, "variants", {"commit": commit, "date": "2026-12-06", "gpu": "NVIDIA H100",
                                               "command": "build/attnprof --variant all", "points": [p]})
        self.assertEqual(sorted(p.get("dtype", "bf16") for r in doc["runs"] for p in r["points"]), ["bf16", "fp8"])
        page = md.render({"variants": doc})
        self.assertIn("| 4x16x4096x128 causal fwd | sdpa-cudnn |", page)
        self.assertIn("| 4x16x4096x128 causal fwd fp8 | sdpa-cudnn |", page)

    def test_the_recorded_command_leaves_out_where_results_went(self):
        argv = ["--suite", "serving", "--record", "/root/out/rec", "--commit=abc1234", "--markdown", "/root/out/x.md",
                "--json=/root/out/x.json", "--report", "/root/out/r.md", "--iters", "50"]
        self.assertEqual(br.command_line("bench_kernels.py", argv),
                         "python3 scripts/bench_kernels.py --suite serving --iters 50")

    def test_the_commit_comes_from_the_flag_then_the_environment(self):
        self.assertEqual(br.measured_commit("F184856aa"), "f184856")
        os.environ["ATTNPROF_COMMIT"] = "abcdef0-dirty"
        try:
            self.assertEqual(br.measured_commit(), "abcdef0-dirty")
        finally:
            del os.environ["ATTNPROF_COMMIT"]
        with self.assertRaisesRegex(br.RecordError, "is not 7-40 hex"):
            br.measured_commit("main")


class Page(unittest.TestCase):
    def docs(self, *runs):
        return {"forward": {"schema": br.SCHEMA, "suite": "forward", "runs": list(runs)}}

    def test_rows_name_their_run_and_unrecorded_figures_show_as_a_dash(self):
        page = md.render(self.docs(
            run("aaaaaaa", [fwd("custom-flash", median_us=73.6, tflops=234, vs=0.83, baseline="sdpa-cudnn",
                                baseline_tflops=281)], date="2026-11-30"),
            run("bbbbbbb", [fwd("custom-flash-sm90", tflops=284, vs=1.05)], command="bench --repeat 3")))
        rows = [line for line in page.splitlines() if line.startswith("| 8x16x1024x64")]
        self.assertEqual(rows, [
            "| 8x16x1024x64 | causal | custom-flash | 73.6 | — | 234 | 0.83× | sdpa-cudnn | 281 | — | `aaaaaaa` | "
            "2026-11-30 | 1 |",
            "| 8x16x1024x64 | causal | custom-flash-sm90 | — | — | 284 | 1.05× | — | — | — | `bbbbbbb` | 2026-12-01 | 2 |"])
        self.assertIn("2. `bench --repeat 3` at `bbbbbbb`, 2026-12-01 (NVIDIA H200).", page)
        docs = self.docs(run("aaaaaaa", [fwd("custom-flash", tflops=234)]), run("bbbbbbb", [fwd("sdpa-flash")]))
        self.assertEqual(md.render(docs), md.render(json.loads(json.dumps(docs))))  # the records alone decide

    def test_a_kernel_by_name_that_refused_the_shape_leaves_no_row_in_the_python_forward_table(self):
        points = [{"shape": "4x16x4096x128", "mask": "full", "variant": "sm90 fp8", "us": 719.3, "tflops": 764},
                  {"shape": "4x16x4096x128", "mask": "full", "variant": "sm90 fp8 sm90_fwd_hdim64_fp8_c3",
                   "skipped": "refused the shape"},
                  {"shape": "4x16x4096x64", "mask": "full", "variant": "sm90 fp8 sm90_fwd_hdim64_fp8_c3",
                   "us": 592.0, "tflops": 464}]
        page = md.render({"op_forward": {"schema": br.SCHEMA, "suite": "op_forward",
                                         "runs": [run("aaaaaaa", points, command="bench_flash_sm90.py --fp8")]}})
        rows = [line.split(" | ")[:3] for line in page.splitlines() if line.startswith("| 4x16")]
        self.assertEqual(rows, [["| 4x16x4096x64", "full", "sm90 fp8 sm90_fwd_hdim64_fp8_c3"],
                                ["| 4x16x4096x128", "full", "sm90 fp8"]])

    def test_problems_sort_by_size_and_variants_by_the_registry(self):
        page = md.render(self.docs(run("aaaaaaa", [fwd("custom-flash-sm90", shape="1x16x16384x128"),
                                                   fwd("custom-flash", shape="4x16x4096x128"),
                                                   fwd("sdpa-flash", shape="4x16x4096x128"),
                                                   fwd("custom-flash", shape="8x16x1024x64", mask="full"),
                                                   fwd("custom-flash", shape="8x16x1024x64")])))
        rows = [line.split(" | ")[:3] for line in page.splitlines() if line.startswith("| ") and "x" in line[:4]]
        self.assertEqual(rows, [["| 8x16x1024x64", "causal", "custom-flash"], ["| 8x16x1024x64", "full", "custom-flash"],
                                ["| 4x16x4096x128", "causal", "sdpa-flash"], ["| 4x16x4096x128", "causal", "custom-flash"],
                                ["| 1x16x16384x128", "causal", "custom-flash-sm90"]])

    def test_check_mode_exit_codes(self):
        with tempfile.TemporaryDirectory() as d:
            rec, page = os.path.join(d, "bench"), os.path.join(d, "B.md")
            br.record(rec, "forward", run("aaaaaaa", [fwd("custom-flash", tflops=234)]))
            cmd = [sys.executable, os.path.join(ROOT, "scripts", "benchmarks_md.py"), "--records", rec, "--output", page]
            self.assertEqual(subprocess.run(cmd, capture_output=True).returncode, 0)
            ok = subprocess.run(cmd + ["--check"], capture_output=True, text=True)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            with open(page, "a") as fh:
                fh.write("hand-edited\n")
            drift = subprocess.run(cmd + ["--check"], capture_output=True, text=True)
            self.assertEqual(drift.returncode, 1)
            self.assertIn("+hand-edited", drift.stdout.replace("-hand-edited", "+hand-edited"))
            self.assertIn("differs from what", drift.stderr)
            with open(br.path_of(rec, "forward"), "w") as fh:
                fh.write("{")
            bad = subprocess.run(cmd + ["--check"], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertEqual(len(bad.stderr.strip().splitlines()), 1)
            self.assertIn("forward.json: not valid JSON", bad.stderr)

    def test_the_committed_records_are_valid_and_make_a_page_under_440_lines(self):
        page = md.render(br.load_dir(os.path.join(ROOT, "docs", "bench")))
        # 300 until the variable-length prefill section, 320 until the op-level forward's (fp8) one,
        # 360 until the FP8 suite's (issue 32's table: four variants at eight points)
        self.assertLess(page.count("\n"), 440)


FAKE_ATTNPROF = r'''#!{python}
"""Stands in for attnprof: writes the summary bench_kernels.py reads, with fixed times per variant."""
import json, os, sys
a = sys.argv[1:]
arg = lambda f: a[a.index(f) + 1]
v, b, hq, hkv = arg("--variant"), int(arg("--batch")), int(arg("--heads")), int(arg("--kv-heads"))
sq, skv, d = int(arg("--seq-q")), int(arg("--seq-kv")), int(arg("--head-dim"))
dtype = arg("--dtype")
if dtype == "fp8" and v == "custom-flash-sm90" and d != 128:
    sys.exit(f"attnprof: custom-flash-sm90 cannot run here: custom-flash-sm90 runs fp8 at head_dim 128, not {{d}}")
median = {{"sdpa-cudnn": 100.0, "custom-flash-sm90": 80.0, "inplace": 400.0, "sdpa-auto": 110.0}}.get(v, 120.0)
if dtype == "fp8" and v == "custom-flash-sm90":
    median = 50.0
out = os.path.join(arg("--out"), v)
os.makedirs(out)
with open(os.path.join(out, "x.summary.json"), "w") as fh:
    json.dump({{"headline": {{"gpu_time_median_us": median,
                              "accuracy": {{"rel_error_vs_fp64": 0.0123 if dtype == "fp8" else 0.0021}},
                              "scopes": [{{"cuda_time_avg_us": median - 5, "kernels_per_call": 1}}]}},
               "problem": {{"flops": 4.0 * b * hq * sq * skv * d / 2}}, "facts": {{"kernel": "k"}},
               "environment": {{"device_name": "Stand-in GPU", "torch_version": "2.11.0", "cuda_runtime": "13.0"}}}}, fh)
'''


def write_fake_attnprof(directory):
    fake = os.path.join(directory, "attnprof")
    with open(fake, "w") as fh:
        fh.write(FAKE_ATTNPROF.format(python=sys.executable))
    os.chmod(fake, 0o755)
    return fake


class BenchKernelsRecord(unittest.TestCase):
    def test_record_holds_what_the_table_printed(self):
        with tempfile.TemporaryDirectory() as d:
            fake = write_fake_attnprof(d)
            rec = os.path.join(d, "bench")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench_kernels.py"), "--attnprof", fake,
                                "--suite", "forward", "--variants", "custom-flash-sm90", "--shapes", "8x16x1024x64",
                                "--masks", "causal", "--iters", "5", "--record", rec, "--commit", "f184856"],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("| 8x16x1024x64 | causal | fwd | custom-flash-sm90 | 80.0 | 75.0 |", p.stdout)
            doc = br.load(br.path_of(rec, "forward"))
            (r,) = doc["runs"]
            self.assertEqual(r["commit"], "f184856")
            self.assertEqual(r["command"], "python3 scripts/bench_kernels.py --attnprof " + fake + " --suite forward "
                             "--variants custom-flash-sm90 --shapes 8x16x1024x64 --masks causal --iters 5")
            if not shutil.which("nvidia-smi"):
                self.assertEqual(r["gpu"], "Stand-in GPU")
            sm90, cudnn = r["points"]
            self.assertEqual((sm90["variant"], cudnn["variant"]), ("custom-flash-sm90", "sdpa-cudnn"))
            self.assertEqual({k: sm90[k] for k in ("group", "median_us", "profiled_us", "vs", "baseline",
                                                     "baseline_median_us", "baseline_profiled_us")},
                             {"group": "fused", "median_us": 80.0, "profiled_us": 75.0, "vs": 1.25,
                              "baseline": "sdpa-cudnn", "baseline_median_us": 100.0, "baseline_profiled_us": 95.0})
            flops = 4.0 * 8 * 16 * 1024 * 1024 * 64 / 2
            self.assertAlmostEqual(sm90["tflops"], round(flops / 80e-6 / 1e12, 4))
            self.assertNotIn("facts", sm90)

    def test_fp8_suite_records_dtype_error_and_skips(self):
        with tempfile.TemporaryDirectory() as d:
            fake = write_fake_attnprof(d)
            rec = os.path.join(d, "bench")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench_kernels.py"), "--attnprof", fake,
                                "--suite", "fp8", "--shapes", "8x16x1024x64,4x16x4096x128", "--masks", "full", "--iters", "5",
                                "--record", rec, "--commit", "f184856"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("| 8x16x1024x64 | full | fwd | sdpa-auto fp8 | 110.0 |", p.stdout)
            self.assertIn("error vs fp64: 0.0123", p.stdout)
            runs = br.load(br.path_of(rec, "fp8"))["runs"][0]["points"]
            points = {q["variant"]: q for q in runs if q["shape"] == "8x16x1024x64"}
            self.assertEqual(set(points), {"custom-flash-sm90 fp8", "sdpa-auto fp8", "custom-flash-sm90", "sdpa-cudnn"})
            self.assertEqual(points["custom-flash-sm90 fp8"]["skipped"],
                             "attnprof: custom-flash-sm90 cannot run here: custom-flash-sm90 runs fp8 at head_dim 128, not 64")
            self.assertEqual(points["sdpa-auto fp8"]["error_vs_fp64"], 0.0123)
            self.assertEqual(points["custom-flash-sm90"]["error_vs_fp64"], 0.0021)
            self.assertAlmostEqual(points["sdpa-auto fp8"]["vs"], 100.0 / 110.0, places=4)
            # Issue 32's ratio: each fp8 point against custom-flash-sm90 in bf16, same shape and mask.
            self.assertAlmostEqual(points["sdpa-auto fp8"]["vs_our_bf16"], 80.0 / 110.0, places=4)
            self.assertNotIn("vs_our_bf16", points["custom-flash-sm90"])
            d128 = {q["variant"]: q for q in runs if q["shape"] == "4x16x4096x128"}
            self.assertAlmostEqual(d128["custom-flash-sm90 fp8"]["vs_our_bf16"], 80.0 / 50.0, places=4)
            self.assertIn("vs custom-flash-sm90 bf16: 1.60x", p.stdout)
            page = md.render(br.load_dir(rec))
            self.assertIn("## FP8", page)
            self.assertIn("| 8x16x1024x64 | full | sdpa-auto fp8 |", page)
            self.assertNotIn("## FP8 decode", page)  # no decode point was asked for

    def test_fp8_suite_decode_points_count_each_dtypes_bytes(self):
        with tempfile.TemporaryDirectory() as d:
            fake = write_fake_attnprof(d)
            rec = os.path.join(d, "bench")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench_kernels.py"), "--attnprof", fake,
                                "--suite", "fp8", "--shapes", "8x32/8x1/4096x128", "--iters", "5", "--record", rec,
                                "--commit", "f184856"], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            runs = br.load(br.path_of(rec, "fp8"))["runs"][0]["points"]
            points = {q["variant"]: q for q in runs}
            self.assertEqual(set(points), {"custom-flash-sm90 fp8", "custom-flash-sm90", "sdpa-flash"})
            self.assertEqual({q["group"] for q in runs}, {"fp8_decode"})
            kv = 2 * 8 * 8 * 4096 * 128  # K and V values
            self.assertAlmostEqual(points["custom-flash-sm90 fp8"]["gbs"], kv * 1 / 50e-6 / 1e9, places=2)
            self.assertAlmostEqual(points["custom-flash-sm90"]["gbs"], kv * 2 / 80e-6 / 1e9, places=2)
            self.assertAlmostEqual(points["custom-flash-sm90 fp8"]["vs_our_bf16"], 80.0 / 50.0, places=4)
            self.assertAlmostEqual(points["custom-flash-sm90 fp8"]["vs"], 120.0 / 50.0, places=4)
            page = md.render(br.load_dir(rec))
            self.assertIn("## FP8 decode", page)
            self.assertIn("| 8x32/8x1/4096x128 | causal | custom-flash-sm90 fp8 | 50.0 |", page)


class BenchShapes(unittest.TestCase):
    """The op-level benches' shape arguments (parsed on any machine; timing needs a GPU)."""

    def test_backward_shapes_take_grouped_query_heads(self):
        import argparse
        import bench_flash_bwd as bwd
        self.assertEqual(bwd.parse_bwd_shape("4x32/8x4096x128"), (4, 32, 4096, 128, 8))
        self.assertEqual(bwd.parse_bwd_shape("8x16x1024x64"), (8, 16, 1024, 64, 16))
        self.assertEqual(bwd.label((4, 32, 4096, 128, 8)), br.shape_label(4, 32, 8, 4096, 4096, 128))
        self.assertEqual(bwd.label((8, 16, 1024, 64, 16)), "8x16x1024x64")
        for bad in ("4x30/8x4096x128", "4x16x1", "4x32/8x0x128", "4x32/x4096x128", "axb"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                bwd.parse_bwd_shape(bad)

    def test_fp8_configuration_head_dim_from_its_name(self):
        import bench_flash_sm90 as fwd
        self.assertEqual(fwd.fp8_head_dim(None), 128)
        self.assertEqual(fwd.fp8_head_dim("sm90_fwd_hdim64_fp8"), 64)
        self.assertEqual(fwd.fp8_head_dim("sm90_fwd_hdim256_fp8"), 256)
        self.assertEqual(fwd.fp8_head_dim("sm90_fwd_hdim128_fp8_n192"), 128)


if __name__ == "__main__":
    unittest.main(verbosity=2)
