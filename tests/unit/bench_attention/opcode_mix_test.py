#!/usr/bin/env python3
"""Tests of bench/attention/opcode_mix.py on two hand-written ncu source pages: executed
instructions summed by opcode (predicates dropped, modifiers cut to two parts), each count
per executed HGMMA, one column pair a page, and a clear error for a page without the columns."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "attention", "opcode_mix.py")
HEAD = ('"Kernel Name","k"\n'
        '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"\n')
OURS = HEAD + ('"0x10","  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24","1","100"\n'
               '"0x20","  MUFU.EX2 R1, R2","5","400"\n'
               '"0x30","  @!P0 MUFU.EX2 R3, R4","2","200"\n'
               '"0x40","  FFMA R1, R2, R3, R4","0","300"\n')
PEER = HEAD + ('"0x10","  HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], R24","1","200"\n'
               '"0x20","  MUFU.EX2 R1, R2","5","300"\n'
               '"0x30","  FFMA.FTZ R1, R2, R3, R4","0","900"\n')


class OpcodeMixTest(unittest.TestCase):
    def page(self, text):
        fd, path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def run_on(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def test_counts_by_opcode_per_hgmma_side_by_side(self):
        r = self.run_on(f"ours={self.page(OURS)}", f"peer={self.page(PEER)}")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {l.split(" | ")[0][2:]: l for l in r.stdout.splitlines()[2:]}
        self.assertEqual(rows["all"], "| all | 1000 | 10.0 | 1400 | 7.0 |")
        # the predicated MUFU joins the plain one; 600 / 100 HGMMA and 300 / 200
        self.assertEqual(rows["MUFU.EX2"], "| MUFU.EX2 | 600 | 6.00 | 300 | 1.50 |")
        self.assertEqual(rows["FFMA.FTZ"], "| FFMA.FTZ | 0 | 0.00 | 900 | 4.50 |")
        self.assertEqual(rows["HGMMA.64x128x16"], "| HGMMA.64x128x16 | 100 | 1.00 | 0 | 0.00 |")
        self.assertEqual(rows["HGMMA.64x64x16"], "| HGMMA.64x64x16 | 0 | 0.00 | 200 | 1.00 |")
        self.assertIn("FFMA", rows)

    def test_a_page_without_the_columns_is_named(self):
        path = self.page("==PROF== nothing profiled\n")
        r = self.run_on(f"ours={path}")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no ncu source-page header", r.stderr)

    def test_a_page_without_a_name_is_refused(self):
        r = self.run_on(self.page(OURS))
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected NAME=PATH", r.stderr)


if __name__ == "__main__":
    unittest.main()
