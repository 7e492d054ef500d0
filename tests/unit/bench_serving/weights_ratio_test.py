#!/usr/bin/env python3
"""Tests of bench/serving/weights_ratio.py on hand-written results.md tables (summarize.py's
format) whose ratios are worked out here."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "serving", "weights_ratio.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import weights_ratio  # noqa: E402

HEADER = ("| concurrency | requests ok | output tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms |"
          " ITL p99 ms | tokens/request | tokens/message | server CPU us/token |"
          " client CPU us/token | HBM fraction |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|\n")


def table(rows):
    body = "".join(f"| {c} | 8/8 | {tps:,.1f} | 1 | 2 | 3 | 4 | 128.0 | 1.00 | 5 | 6 | - |\n"
                   for c, tps in rows)
    # A second table after the first (as run.sh may append): never read.
    extra = "\n### TTFT\n\n" + HEADER + "| 1 | 32/32 | 99.0 | 1 | 2 | 3 | 4 | 8.0 | 1.00 | 5 | 6 | - |\n"
    return "### 8b.gguf\n\n" + HEADER + body + extra


class WeightsRatioTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def write(self, name, rows):
        os.makedirs(os.path.join(self.dir, name))
        with open(os.path.join(self.dir, name, "results.md"), "w") as f:
            f.write(table(rows))

    def test_rows_of_the_first_table_only(self):
        self.write("r1_bf16", [(64, 40000.0), (256, 16776.9)])
        rows = lambda path: weights_ratio.tokens_per_s(weights_ratio.first_table(path))
        self.assertEqual(rows(os.path.join(self.dir, "r1_bf16", "results.md")),
                         {64: 40000.0, 256: 16776.9})
        self.assertEqual(rows(os.path.join(self.dir, "none.md")), {})
        # With `after`, the table under the first "### " title holding that text instead.
        ttft = weights_ratio.first_table(os.path.join(self.dir, "r1_bf16", "results.md"), after="TTFT")
        self.assertEqual(weights_ratio.tokens_per_s(ttft), {1: 99.0})

    def test_ratios_per_round_and_over_the_rounds(self):
        self.write("r1_bf16", [(256, 16000.0)])
        self.write("r1_native", [(256, 15200.0)])  # 0.950
        self.write("r2_bf16", [(256, 17000.0)])
        self.write("r2_native", [(256, 15300.0)])  # 0.900
        lines, complete = weights_ratio.ratio_table(self.dir, 2)
        self.assertTrue(complete)
        self.assertIn("| 256 | 1 | 16,000.0 | 15,200.0 | 0.950 |", lines)
        self.assertIn("| 256 | 2 | 17,000.0 | 15,300.0 | 0.900 |", lines)
        # (15200 + 15300) / (16000 + 17000) = 30500 / 33000 = 0.924
        self.assertIn("concurrency 256: 0.924 (native / bf16) over 2 rounds", lines)

    def test_a_missing_run_is_a_dash_and_fails(self):
        self.write("r1_bf16", [(256, 16000.0)])
        self.write("r1_native", [(256, 15200.0)])
        self.write("r2_bf16", [(256, 17000.0)])
        lines, complete = weights_ratio.ratio_table(self.dir, 2)
        self.assertFalse(complete)
        self.assertIn("| 256 | 2 | 17,000.0 | - | - |", lines)
        self.assertFalse(any(l.startswith("concurrency 256") for l in lines))
        run = subprocess.run([sys.executable, SCRIPT, self.dir, "2"], capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("| 256 | 1 | 16,000.0 | 15,200.0 | 0.950 |", run.stdout)

    def test_a_variant_against_bf16_and_the_head(self):
        self.write("r1_bf16", [(256, 16000.0)])
        self.write("r1_native", [(256, 15200.0)])
        self.write("r1_variant", [(256, 15600.0)])  # 0.975 of bf16, 1.026 of native
        self.write("r2_bf16", [(256, 17000.0)])
        self.write("r2_native", [(256, 15300.0)])
        self.write("r2_variant", [(256, 16150.0)])  # 0.950, 1.056
        lines, complete = weights_ratio.ratio_table(self.dir, 2, variant=True)
        self.assertTrue(complete)
        self.assertEqual(lines[0], "| concurrency | round | bf16 tok/s | native tok/s | "
                         "variant tok/s | native / bf16 | variant / bf16 | variant / native |")
        self.assertIn("| 256 | 1 | 16,000.0 | 15,200.0 | 15,600.0 | 0.950 | 0.975 | 1.026 |", lines)
        self.assertIn("| 256 | 2 | 17,000.0 | 15,300.0 | 16,150.0 | 0.900 | 0.950 | 1.056 |", lines)
        # 31750 / 33000 = 0.962; 31750 / 30500 = 1.041
        self.assertIn("concurrency 256: 0.924 (native / bf16), 0.962 (variant / bf16), "
                      "1.041 (variant / native) over 2 rounds", lines)
        # Without --variant the variant's runs are not read.
        lines, complete = weights_ratio.ratio_table(self.dir, 2)
        self.assertTrue(complete)
        self.assertIn("| 256 | 1 | 16,000.0 | 15,200.0 | 0.950 |", lines)
        # A missing variant run fails the table with --variant.
        os.remove(os.path.join(self.dir, "r2_variant", "results.md"))
        run = subprocess.run([sys.executable, SCRIPT, self.dir, "2", "--variant"],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("| 256 | 2 | 17,000.0 | 15,300.0 | - | 0.900 | - | - |", run.stdout)

    def write_wide(self, name, extra_columns, rows):
        """results.md of run `name`: HEADER's columns plus extra_columns, then `rows` (each
        the cells after HEADER's twelve)."""
        header = HEADER.splitlines()[0] + "".join(f" {c} |" for c in extra_columns) + "\n" + \
            "|---" * (12 + len(extra_columns)) + "|\n"
        os.makedirs(os.path.join(self.dir, name))
        with open(os.path.join(self.dir, name, "results.md"), "w") as f:
            f.write("### m.gguf\n\n" + header + "".join(
                f"| {c} | 8/8 | {tps:,.1f} | 1 | 2 | 3 | 4 | 128.0 | 1.00 | 5 | 6 | - | {tail} |\n"
                for c, tps, tail in rows))

    def test_the_gpu_columns_beside_the_ratios(self):
        gpu = ("SM MHz", "GPU W", "power-capped")
        self.write_wide("r1_bf16", gpu, [(256, 16000.0, "1755 | 690 | 80%"), (64, 9000.0, "- | - | -")])
        self.write_wide("r1_native", gpu, [(256, 15200.0, "1620 | 699 | 100%"),
                                           (64, 9000.0, "- | - | -")])
        self.assertEqual(weights_ratio.gpu_columns(weights_ratio.first_table(
            os.path.join(self.dir, "r1_native", "results.md"))), {256: "1620 / 699 / 100%"})
        lines, complete = weights_ratio.ratio_table(self.dir, 1)
        self.assertTrue(complete)
        self.assertIn("| 256 | 1 | 16,000.0 | 15,200.0 | 0.950 |", lines)
        self.assertIn("| concurrency | round | bf16 | native |", lines)
        self.assertIn("| 256 | 1 | 1755 / 690 / 80% | 1620 / 699 / 100% |", lines)
        # A concurrency whose runs have no samples gets no row in the GPU table.
        self.assertFalse(any(l.startswith("| 64 | 1 | -") for l in lines))

    def test_the_engine_step_columns_beside_the_ratios(self):
        wide = ("SM MHz", "GPU W", "power-capped", "decode steps (n / mean ms)",
                "steps with prompts (n / mean ms)")
        self.write_wide("r1_bf16", wide, [(256, 16000.0, "- | - | - | 960 / 2.260 | 140 / 7.600")])
        self.write_wide("r1_native", wide, [(256, 15200.0, "- | - | - | 958 / 2.540 | 142 / 7.700")])
        self.assertEqual(weights_ratio.step_columns(weights_ratio.first_table(
            os.path.join(self.dir, "r1_native", "results.md"))), {256: "958 / 2.540; 142 / 7.700"})
        lines, complete = weights_ratio.ratio_table(self.dir, 1)
        self.assertTrue(complete)
        self.assertIn("| 256 | 1 | 960 / 2.260; 140 / 7.600 | 958 / 2.540; 142 / 7.700 |", lines)
        # No GPU samples in these runs: no GPU table, only the steps table.
        self.assertFalse(any(l.startswith("GPU during") for l in lines))
        self.assertTrue(any(l.startswith("Engine steps of each run") for l in lines))

    def test_bad_usage(self):
        for args in (["0"], ["2", "--bogus"], ["2", "--variant", "x"]):
            run = subprocess.run([sys.executable, SCRIPT, self.dir] + args, capture_output=True,
                                 text=True)
            self.assertEqual(run.returncode, 2, args)


if __name__ == "__main__":
    unittest.main()
