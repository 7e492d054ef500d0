#!/usr/bin/env python3
"""Tests of bench/serving/timeline_summary.py on a hand-written --timeline-out CSV whose
overlaps are worked out here."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "serving", "timeline_summary.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import timeline_summary  # noqa: E402

# Main stream 7: norm [0, 2], gemm [2, 6], norm [6, 10] (beside the dequantize), gemm
# [10, 14]; stream 9: a copy [0, 1] (no CTAs: not a kernel) and the dequantize [6, 11].
ROWS = [
    'L,0.000,1.000,9,0,"memcpy"',
    'L,0.000,2.000,7,64,"void ns::rmsnorm_kernel<float>(ns::P)"',
    'L,2.000,6.000,7,96,"nvjet_sm90_tst_64x8"',
    'L,6.000,11.000,9,433,"ns::quant::(anonymous namespace)::dequantize_batch_kernel'
    '(ns::(anonymous namespace)::B)"',
    'L,6.000,10.000,7,64,"void ns::rmsnorm_kernel<float>(ns::P)"',
    'L,10.000,14.000,7,96,"nvjet_sm90_tst_64x8"',
]


class TimelineSummaryTest(unittest.TestCase):
    def write(self, rows):
        f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
        f.write("\n".join(rows) + "\n")
        f.close()
        self.addCleanup(os.remove, f.name)
        return f.name

    def test_base_names(self):
        self.assertEqual(timeline_summary.base_name(
            "void a::b::(anonymous namespace)::k<(a::F)3, true, 1>(a::P)"), "k")
        self.assertEqual(timeline_summary.base_name("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_TNT"),
                         "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_TNT")
        self.assertEqual(timeline_summary.base_name("memcpy"), "memcpy")

    def test_overlaps_and_the_kernel_beside_them(self):
        steps = timeline_summary.read(self.write(ROWS))
        text = timeline_summary.summarize("L", steps["L"])
        self.assertIn("Span 14.0 us; main stream 7 (its kernels' union 14.0 us).", text)
        self.assertIn("| 7 (main) | 4 | 14.0 |", text)
        self.assertIn("| 9 | 1 | 5.0 |", text)  # the copy has no CTAs
        # The dequantize [6, 11] has the second norm [6, 10] and the gemm [10, 11] beside it.
        self.assertIn("| dequantize_batch_kernel | 1 | 5.00 | 5.00 |", text)
        # The norm: 2 us alone, 4 us beside the dequantize; the gemms: never beside it for
        # the first, 1 us of the second.
        self.assertIn("| rmsnorm_kernel | 2 | 2.00 | 1 | 4.00 |", text)
        self.assertIn("| nvjet_sm90_tst_64x8 | 2 | 4.00 | 1 | 4.00 |", text)

    def test_malformed_rows_name_the_line(self):
        bad = self.write(ROWS[:2] + ['L,1.0,oops,7,64,"k"'])
        with self.assertRaisesRegex(ValueError, r":3: "):
            timeline_summary.read(bad)
        backwards = self.write(['L,5.0,1.0,7,64,"k"'])
        with self.assertRaisesRegex(ValueError, "ends before it starts"):
            timeline_summary.read(backwards)
        run = subprocess.run([sys.executable, SCRIPT, bad], capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("timeline_summary:", run.stderr)


if __name__ == "__main__":
    unittest.main()
