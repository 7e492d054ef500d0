#!/usr/bin/env python3
"""Tests of bench/attention/compare_runs.py on hand-written attention_bench CSVs: the best time
of each build over its runs, base / new, and the --also column."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "attention", "compare_runs.py")

HEAD = "kind,config,impl,ms,tflops,gbps\n"


class CompareRunsTest(unittest.TestCase):
    def csv(self, rows):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write(HEAD + "".join(f"{k},{c},{i},{ms},1,1\n" for k, c, i, ms in rows))
        self.addCleanup(os.remove, path)
        return path

    def test_best_of_runs_ratio_and_also_column(self):
        base = [self.csv([("prefill", "s512", "wgmma", 0.30), ("prefill", "s512", "mma", 0.27)]),
                self.csv([("prefill", "s512", "wgmma", 0.28), ("prefill", "s512", "mma", 0.26)])]
        new = [self.csv([("prefill", "s512", "wgmma", 0.25), ("prefill", "s512", "mma", 0.29)]),
               self.csv([("prefill", "s512", "wgmma", 0.20), ("prefill", "s512", "mma", 0.24)])]
        out = subprocess.run([sys.executable, SCRIPT, "--base", *base, "--new", *new, "--also",
                              "mma"], check=True, capture_output=True, text=True).stdout
        rows = [l for l in out.splitlines() if l.startswith("| prefill")]
        # best base 0.28, best new 0.20: 1.400; best mma over all runs 0.24: 0.24 / 0.20 = 1.200
        self.assertEqual(rows, ["| prefill | s512 | 0.2800 | 0.2000 | 1.400 | 1.200 |"])

    def test_rows_missing_from_one_build_are_left_out(self):
        base = [self.csv([("prefill", "a", "wgmma", 1.0), ("prefill", "b", "wgmma", 2.0)])]
        new = [self.csv([("prefill", "a", "wgmma", 0.5)])]
        out = subprocess.run([sys.executable, SCRIPT, "--base", *base, "--new", *new],
                             check=True, capture_output=True, text=True).stdout
        rows = [l for l in out.splitlines() if l.startswith("| prefill")]
        self.assertEqual(rows, ["| prefill | a | 1.0000 | 0.5000 | 2.000 |"])


if __name__ == "__main__":
    unittest.main()
