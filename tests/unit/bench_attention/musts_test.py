#!/usr/bin/env python3
"""Tests of bench/attention/musts.py on a hand-written peers table: which rows decide each of
issue 20's musts, met or not, and what is left out (window rows, fp16 in the grid musts)."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "attention", "musts.py")

PREFILL_HEAD = ("| config | wgmma ms | wgmma | mma ms | mma | naive | FA2 | cuDNN | wgmma/FA2 | "
                "wgmma/cuDNN | mma/FA2 | mma/cuDNN |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")


def prefill_row(config, ratio):
    return f"| {config} | 1 | 1 | 1 | 1 | 1 | 1 | 1 | 1 | {ratio} | 1 | 1 |\n"


def table(grid, serving, decode):
    text = "\n### prefill (TFLOP/s; bf16 unless the config says fp16; ratio = ours / peer)\n\n"
    text += PREFILL_HEAD + "".join(prefill_row(c, r) for c, r in grid)
    text += "\n### serving-shaped prefill (TFLOP/s)\n\nkAuto runs wgmma.\n\n" + PREFILL_HEAD
    text += "".join(prefill_row(c, r) for c, r in serving)
    text += ("\n### decode (GB/s)\n\n| config | splits | ours ms | ours | naive | FA2 | cuDNN | "
             "ours/FA2 | ours/cuDNN |\n|---|---|---|---|---|---|---|---|---|\n")
    text += "".join(f"| {c} | 1 | 1 | 1 | 1 | 1 | 1 | 1 | {r} |\n" for c, r in decode)
    return text


class MustsTest(unittest.TestCase):
    def run_on(self, *texts, args=()):
        paths = []
        for text in texts:
            fd, path = tempfile.mkstemp(suffix=".md")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            self.addCleanup(os.remove, path)
            paths.append(path)
        return subprocess.run([sys.executable, SCRIPT, *args, *paths], check=True, capture_output=True,
                              text=True).stdout.splitlines()

    def test_rows_below_each_bar_are_named_and_window_and_fp16_rows_left_out(self):
        grid = [("b32 s512 h32 d64 full", "0.80"), ("b16 s1024 h32 d64 full", "0.94"),
                ("b4 s4096 h32 d64 full", "1.01"), ("b1 s16384 h32 d64 full", "0.99"),
                ("b16 s1024 h32 d64 full fp16", "0.10"),        # fp16: not in the grid musts
                ("b1 s16384 h32 d64 causal w512", "n/a")]       # no peer
        out = self.run_on(table(grid, [("b1 q512 ctx1024 h9/3 d64 causal", "1.40")],
                                [("b1 ctx1024 h9/3 d64", "0.99"), ("b16 ctx1024 h9/3 d64", "2.00")]))
        self.assertIn("**not met**: 0.94-1.01", out[0])
        self.assertIn("below 0.95: d64 full 1k", out[0])
        self.assertIn("**met at 1 of 2 rows**; not at d64 full 16k 0.99", out[1])
        self.assertIn("**not met**: d64 full 0.80", out[2])
        self.assertIn("fp16 grid (measured, no must): 0.10-0.10", out[3])
        self.assertIn("Serving-shaped rows, must >= 1.0: **met**: bf16 1.40-1.40", out[4])
        self.assertIn("Decode, must >= 1.0: **not met**: bf16 0.99-2.00 (lowest: b1 ctx1024 h9/3 d64)",
                      out[5])

    def test_all_met(self):
        grid = [("b32 s512 h16 d128 causal", "1.00"), ("b16 s1024 h16 d128 causal", "0.95"),
                ("b4 s4096 h16 d128 causal", "1.00")]
        out = self.run_on(table(grid, [("b64 varlen64-1024 t1 h9/3 d64 causal", "1.00")],
                                [("b1 ctx1024 h9/3 d64", "1.00")]))
        self.assertIn("s >= 1k, must >= 0.95 everywhere: **met**: 0.95-1.00", out[0])
        self.assertEqual(out[1], "- Prefill at s >= 4k, must >= 1.0: **met**")
        self.assertIn("s = 512, must >= 1.0: **met**", out[2])
        self.assertIn("Serving-shaped rows, must >= 1.0: **met**", out[3])
        self.assertIn("Decode, must >= 1.0: **met**", out[4])

    def test_several_runs_take_each_rows_median(self):
        def run(r1k, r4k, dec):
            return table([("b16 s1024 h16 d128 causal", r1k), ("b4 s4096 h16 d128 causal", r4k)],
                         [("b64 varlen64-1024 t1 h9/3 d64 causal", "1.50")],
                         [("b1 ctx1024 h9/3 d64", dec)])
        # Medians of the three runs: s1k 0.97 (0.85, 1.05, 0.97), s4k 0.99 (0.93, 1.02, 0.99),
        # decode 1.10 (0.30, 1.10, 1.20).
        out = self.run_on(run("0.85", "0.93", "0.30"), run("1.05", "1.02", "1.10"),
                          run("0.97", "0.99", "1.20"))
        self.assertEqual(out[0], "- Each row's ratio: the median of 3 runs")
        self.assertIn("**met**: 0.97-0.99", out[1])
        self.assertIn("not at d128 causal 4k 0.99", out[2])
        self.assertIn("Decode, must >= 1.0: **met**: bf16 1.10-1.10", out[5])
        # Two runs: the median is their mean; a row without a number in one run takes the other's.
        out = self.run_on(run("0.90", "n/a", "1.00"), run("1.00", "1.04", "1.00"))
        self.assertIn("**met**: 0.95-1.04", out[1])

    def test_kautos_persistent_rows_read_the_persistent_column_where_there_is_one(self):
        # A table with the wgmma_ps column: kAuto runs it up to 4,096 keys on grids of more tiles
        # than SMs (grid s512-s4k, the varlen batch), 8,192 at d128 full (v34), the one-tile
        # wgmma beyond (d64 full s8k, d128 full s16k) and on the split or single-wave chunk rows
        # of one sequence.
        head = ("| config | wgmma ms | wgmma | wgmma_ps ms | wgmma_ps | cuDNN | wgmma/cuDNN | "
                "wgmma_ps/cuDNN |\n|---|---|---|---|---|---|---|---|\n")

        def section(title, rows):
            return f"\n### {title} (TFLOP/s)\n\n" + head + "".join(
                f"| {c} | 1 | 1 | 1 | 1 | 1 | {w} | {p} |\n" for c, w, p in rows)
        text = section("prefill", [("b32 s512 h32 d64 full", "0.80", "1.01"),
                                   ("b16 s1024 h32 d64 full", "0.20", "0.96"),
                                   ("b8 s2048 h32 d64 full", "0.30", "1.02"),
                                   ("b2 s8192 h32 d64 full", "1.05", "0.30"),
                                   ("b2 s8192 h16 d128 full", "0.30", "1.06"),
                                   ("b1 s16384 h16 d128 full", "1.04", "0.30")]) + section(
            "serving-shaped prefill", [("b64 varlen64-1024 t1 h9/3 d64 causal", "0.50", "1.30"),
                                       ("b1 q512 ctx1024 h9/3 d64 causal", "1.20", "0.40")])
        out = self.run_on(text)
        self.assertIn("s >= 1k, must >= 0.95 everywhere: **met**: 0.96-1.06 "
                      "(d64 full 0.96 / 1.02 / 1.05; d128 full 1.06 / 1.04)", out[0])
        self.assertIn("s = 512, must >= 1.0: **met**: d64 full 1.01", out[2])
        self.assertIn("Serving-shaped rows, must >= 1.0: **met**: bf16 1.20-1.30", out[3])
        pinned = self.run_on(text, args=("--impl", "wgmma"))
        self.assertIn("s = 512, must >= 1.0: **not met**: d64 full 0.80", pinned[2])
        self.assertIn("s >= 1k, must >= 0.95 everywhere: **not met**: 0.20-1.05", pinned[0])
        self.assertIn("Serving-shaped rows, must >= 1.0: **not met**: bf16 0.50-1.20", pinned[3])

if __name__ == "__main__":
    unittest.main()
