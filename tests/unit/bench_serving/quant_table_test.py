#!/usr/bin/env python3
"""Tests of bench/serving/quant_table.py on hand-written weights_ratio.sh folders (run.sh's
results.md, server.log and env.txt) whose figures are worked out here."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "..", "bench", "serving", "quant_table.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import quant_table  # noqa: E402

HEADER = ("| concurrency | requests ok | output tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms |"
          " ITL p99 ms | HBM fraction |\n|---|---|---|---|---|---|---|---|\n")


def results(rows, ttft=None):
    """A results.md: the load matrix (rows: (concurrency, tokens/s, HBM fraction)), then,
    with ttft, run.sh's long-prompt table whose TTFT p50 is ttft."""
    text = "### m.gguf\n\n" + HEADER + "".join(
        f"| {c} | 8/8 | {tps:,.1f} | 9.9 | 9.9 | 1 | 2 | {hbm} |\n" for c, tps, hbm in rows)
    if ttft is not None:
        text += ("\nHBM fraction: a note between the tables.\n\n### m.gguf: TTFT with 512-token "
                 "prompts -> 8 new tokens, light load\n\n" + HEADER +
                 f"| 1 | 16/16 | 900.0 | {ttft} | 7.0 | 1 | 2 | 5.0% |\n")
    return text


class QuantTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def run_folder(self, folder, name, rows, ttft=None, log="", size=None):
        path = os.path.join(self.dir, folder, name)
        os.makedirs(path)
        with open(os.path.join(path, "results.md"), "w") as f:
            f.write(results(rows, ttft))
        with open(os.path.join(path, "server.log"), "w") as f:
            f.write(log)
        with open(os.path.join(path, "env.txt"), "w") as f:
            f.write("date: x\n" + (f"model: /tmp/m.gguf ({size} bytes)\n" if size else ""))

    def test_rounds_of_several_folders_and_the_sums(self):
        native_log = "info: cuda: weights native (Q4_K, Q6_K) 1.00 GiB + bf16/fp32 0.05 GiB; KV\n"
        self.run_folder("a", "r1_bf16", [(1, 100.0, "50.0%"), (256, 1000.0, "30.0%")], ttft=10.0,
                        log="info: weights bf16 3.50 GiB; KV\n")
        self.run_folder("a", "r1_native", [(1, 250.0, "40.0%"), (256, 900.0, "14.0%")], ttft=12.0,
                        log=native_log, size=2**30)
        self.run_folder("a", "r2_bf16", [(1, 100.0, "50.0%"), (256, 1100.0, "31.0%")], ttft=11.0)
        self.run_folder("a", "r2_native", [(1, 250.0, "40.0%"), (256, 1100.0, "15.0%")], ttft=13.0)
        self.run_folder("b", "r1_bf16", [(256, 900.0, "-")])
        self.run_folder("b", "r1_native", [(256, 855.0, "-")])
        self.run_folder("b", "r2_bf16", [(256, 950.0, "-")])  # no r2_native: not a round
        lines, device, found = quant_table.model_rows(
            "8B", [os.path.join(self.dir, "a"), os.path.join(self.dir, "b")])
        self.assertTrue(found)
        self.assertEqual(lines[0], "| 8B | 1 | 250.0, 250.0 | 100.0, 100.0 | "
                         "2.500, 2.500; **2.500x** | 40.0% / 50.0% |")
        # (900 + 1100 + 855) / (1000 + 1100 + 900) = 2855 / 3000 = 0.952
        self.assertEqual(lines[1], "| 8B | 256 | 900.0, 1,100.0, 855.0 | 1,000.0, 1,100.0, 900.0 | "
                         "0.900, 1.000, 0.950; **0.952x** | 14.0% / 30.0% |")
        # (12 + 13) / (10 + 11) = 1.19
        self.assertEqual(lines[2], "| 8B | TTFT p50 ms, long prompt | 12.0, 13.0 | 10.0, 11.0 | "
                         "1.19x (native / bf16) | |")
        self.assertEqual(device, "- 8B: 1.05 GiB native for a 1.00 GiB file (1.05x), 3.50 GiB bf16")

    def test_a_model_without_a_round_fails(self):
        self.run_folder("a", "r1_bf16", [(256, 1000.0, "-")])
        run = subprocess.run([sys.executable, SCRIPT, "1B=" + os.path.join(self.dir, "a")],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("| 1B | - | - | - | no complete round in", run.stdout)
        self.assertIn("- 1B: -", run.stdout)

    def test_bad_usage(self):
        for args in ([], ["no-equals-sign"], ["label="]):
            run = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
            self.assertEqual(run.returncode, 2, args)
            self.assertIn("quant_table.py LABEL=DIR", run.stderr)


if __name__ == "__main__":
    unittest.main()
