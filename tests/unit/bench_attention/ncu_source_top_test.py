#!/usr/bin/env python3
"""Tests of bench/attention/ncu_source_top.py on a hand-written ncu source-page CSV: the
instructions ranked by sampled stalls with their shares and largest reasons, the totals by
reason, and a clear message for a file without the source table."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "attention", "ncu_source_top.py")
CSV = ('"Kernel Name","k"\n'
       '"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_wait",'
       '"stall_barrier"\n'
       '"0x10","  FFMA R1, R2, R3, R4","10","0","10","0"\n'
       '"0x20","  @!P0 BRA 0x10","60","55","5","0"\n'
       '"0x30","  BAR.SYNC 0x1","30","0","0","30"\n')


class NcuSourceTopTest(unittest.TestCase):
    def run_on(self, text, *args):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True,
                              text=True)

    def test_ranks_instructions_by_samples_with_their_reasons(self):
        r = self.run_on(CSV, "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout.splitlines()
        self.assertEqual(out[0], "3 instructions, 100 samples (Warp Stall Sampling (All Samples))")
        self.assertEqual(out[3], "| 0x20 | 60 | 0.600 | `@!P0 BRA 0x10` | long_sb 55, wait 5 |")
        self.assertEqual(out[4], "| 0x30 | 30 | 0.300 | `BAR.SYNC 0x1` | barrier 30 |")
        self.assertEqual(len([l for l in out if l.startswith("| 0x")]), 2)  # top 2
        self.assertEqual(out[-1], "by reason: long_sb 55, barrier 30, wait 15")

    def test_a_file_without_the_source_table_is_named(self):
        r = self.run_on("==PROF== nothing profiled\n")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no source table", r.stdout)


if __name__ == "__main__":
    unittest.main()
