#!/usr/bin/env python3
"""Tests of bench/attention/fixed_share.py on hand-written ncu source-page CSVs: which
instructions count as per-CTA and per-key-tile code, the sample shares printed, and the refusal
of two profiles that are not the same kernel."""
import gzip
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "attention", "fixed_share.py")
HEAD = ('"Kernel Name","k"\n"Address","Source","Warp Stall Sampling (All Samples)",'
        '"Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"\n')


def profile(rows):
    """rows: [(source, samples, executed)] -> the CSV text ncu prints."""
    return HEAD + "".join(f'"0x{i:x}","{src}","{n}","0","{n}","{e}"\n'
                          for i, (src, n, e) in enumerate(rows))


class FixedShareTest(unittest.TestCase):
    def write(self, text, gz=False):
        fd, path = tempfile.mkstemp(suffix=".csv.gz" if gz else ".csv")
        os.close(fd)
        with (gzip.open(path, "wt") if gz else open(path, "w")) as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def run_on(self, short, long_, *args):
        return subprocess.run([sys.executable, SCRIPT, self.write(profile(short)),
                               self.write(profile(long_), gz=True), *args],
                              capture_output=True, text=True)

    def test_splits_samples_by_how_often_each_instruction_ran(self):
        # 100 CTAs; the short launch walks 4 key tiles a CTA, the long one 128.
        short = [("WAIT_Q", 30, 100), ("HGMMA", 40, 400), ("EXIT", 10, 100), ("X", 20, 300),
                 ("DEAD", 0, 0)]
        long_ = [("WAIT_Q", 30, 100), ("HGMMA", 900, 12800), ("EXIT", 10, 150), ("X", 60, 900),
                 ("DEAD", 0, 0)]
        r = self.run_on(short, long_)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "samples: short 100, long 1000")
        # per-CTA: WAIT_Q (1x) and EXIT (1.5x); per-tile: HGMMA (32x); between: X (3x).
        self.assertIn("per-CTA   short        40 ( 40.0%)  long        40 (  4.0%)", lines)
        self.assertIn("per-tile  short        40 ( 40.0%)  long       900 ( 90.0%)", lines)
        self.assertIn("between   short        20 ( 20.0%)  long        60 (  6.0%)", lines)
        top = lines[lines.index(next(l for l in lines if l.startswith("per-CTA instructions"))) + 1:]
        self.assertEqual([t.split()[-1] for t in top], ["WAIT_Q", "EXIT"])

    def test_a_stricter_ratio_moves_an_instruction_out_of_per_cta(self):
        short = [("WAIT_Q", 30, 100), ("EXIT", 10, 100)]
        long_ = [("WAIT_Q", 30, 100), ("EXIT", 10, 150)]
        out = self.run_on(short, long_, "--ratio", "1.2").stdout
        self.assertIn("per-CTA   short        30 ( 75.0%)", out)
        self.assertIn("between   short        10 ( 25.0%)", out)

    def test_profiles_of_different_kernels_are_refused(self):
        r = self.run_on([("A", 1, 1), ("B", 1, 1)], [("A", 1, 1)])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not the same build's kernel", r.stderr)


if __name__ == "__main__":
    unittest.main()
