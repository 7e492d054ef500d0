#!/usr/bin/env python3
"""Tests of bench/serving/summarize.py on hand-written load outputs, scrapes and logs."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARIZE = os.path.join(HERE, "..", "..", "..", "bench", "serving", "summarize.py")
sys.path.insert(0, os.path.dirname(SUMMARIZE))
import summarize  # noqa: E402


def load_output(concurrency, requests, ok, tokens_per_s, generated, per_request,
                messages=None, client_cpu=None, server_cpu=None):
    lines = [
        f"target 127.0.0.1:1: {requests} requests, concurrency {concurrency}, 2.00 s",
        f"succeeded {ok}, failed {requests - ok}",
        f"throughput: 1.00 req/s, {tokens_per_s} generated tokens/s, 1.0 prompt tokens/s",
        f"tokens: 100 prompt, {generated} generated ({per_request} per request)",
    ]
    if messages is not None:
        lines.append(f"messages: {messages} stream messages, 1.00 generated tokens per message")
    if client_cpu is not None:
        lines.append(f"client cpu: {client_cpu} s (10.0% of one core), 1.00 us per generated token")
    lines += [
        "time to first token    p50      2.5 ms   p90      3.0 ms   p99      4.5 ms   (n=4)",
        "inter-token latency    p50      1.6 ms   p90      1.8 ms   p99      2.0 ms   (n=508)",
        "end-to-end latency     p50    200.0 ms   p90    210.0 ms   p99    220.0 ms   (n=4)",
    ]
    if server_cpu is not None:
        lines.append(f"server cpu: {server_cpu} s")
    return "\n".join(lines) + "\n"


def exposition(steps, step_seconds, prefill_bytes, decode_bytes):
    m = 'model="m"'
    return "\n".join([
        "# HELP flashserve_engine_steps_total Engine steps.",
        "# TYPE flashserve_engine_steps_total counter",
        f"flashserve_engine_steps_total{{{m}}} {steps}",
        f'flashserve_engine_step_seconds_bucket{{{m},le="0.005"}} {steps}',
        f"flashserve_engine_step_seconds_sum{{{m}}} {step_seconds}",
        f"flashserve_engine_step_seconds_count{{{m}}} {steps}",
        f'flashserve_attention_kernel_bytes_total{{{m},phase="prefill"}} {prefill_bytes}',
        f'flashserve_attention_kernel_bytes_total{{{m},phase="decode"}} {decode_bytes}',
        f'flashserve_attention_kernel_bandwidth_bytes_per_second{{{m},phase="decode"}} 1e12',
    ]) + "\n"


class SummarizeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_cpu_per_token_and_tokens_per_message(self):
        path = self.write("load_c4.txt", load_output(4, 16, 16, "1000.0", 2048, "128.0",
                                                     messages=1024, client_cpu="0.50",
                                                     server_cpu="1.00"))
        r = summarize.parse_load_output(path)
        self.assertEqual(r["concurrency"], 4)
        self.assertAlmostEqual(r["tokens_per_message"], 2.0)
        self.assertAlmostEqual(r["client_us_per_token"], 1e6 * 0.5 / 2048)
        self.assertAlmostEqual(r["server_us_per_token"], 1e6 * 1.0 / 2048)
        row = summarize.format_row(r)
        self.assertIn("| 2.00 |", row)
        self.assertIn(f"| {1e6 / 2048:.1f} |", row)

    def test_old_outputs_without_the_new_lines_still_parse(self):
        path = self.write("old.txt", load_output(1, 4, 4, "500.0", 512, "128.0"))
        r = summarize.parse_load_output(path)
        self.assertIsNone(r["server_cpu"])
        # tokens/message, server and client CPU, HBM fraction, SM MHz, GPU W, power-capped,
        # decode steps, steps with prompts
        self.assertTrue(summarize.format_row(r).endswith("| - | - | - | - | - | - | - | - | - |"))

    def test_hbm_fraction_is_the_documented_formula(self):
        # 256 requests of 100 prompt tokens -> 128 new tokens each.
        path = self.write("load_c64.txt", load_output(64, 256, 256, "20000.0", 32768, "128.0"))
        self.write("load_c64.before.prom", exposition(100, 0.5, 1e6, 2e6))
        self.write("load_c64.after.prom", exposition(1100, 3.0, 5e6, 402e6))
        log = self.write("server.log", "model loaded: ... cuda: H200: weights 256.0 MiB bf16; KV ...\n")
        info = self.write("server.info.txt",
                          "shape:          30 layers, hidden 576, 9 heads / 3 KV heads, head_dim 64\n")
        weights = summarize.weight_bytes(log)
        self.assertEqual(weights, 256 * 2**20)
        kv_token = summarize.kv_bytes_per_token(info)
        self.assertEqual(kv_token, 2 * 30 * 3 * 64 * 2)
        row = summarize.parse_load_output(path)
        row["prompt_tokens"] = 256 * 100
        got = summarize.hbm_fraction(path, row, weights, kv_token, 4800)
        steps, seconds = 1000, 2.5
        kv = 256 * ((128 - 1) * (100 + 128 / 2) + 100) * kv_token
        self.assertAlmostEqual(got, (steps * 256 * 2**20 + kv) / seconds / 4.8e12)
        # No scrapes, no bf16 weights line (the CPU backend logs fp32), no shape or no peak: none.
        self.assertIsNone(summarize.hbm_fraction(path, row, None, kv_token, 4800))
        self.assertIsNone(summarize.hbm_fraction(path, row, weights, None, 4800))
        self.assertIsNone(summarize.hbm_fraction(path, row, weights, kv_token, None))
        other = self.write("load_c1.txt", load_output(1, 4, 4, "500.0", 512, "128.0"))
        self.assertIsNone(summarize.hbm_fraction(other, summarize.parse_load_output(other),
                                                 weights, kv_token, 4800))
        cpu_log = self.write("cpu.log", "cpu: weights 540.0 MiB fp32; KV cache ...\n")
        self.assertIsNone(summarize.weight_bytes(cpu_log))

    def test_engine_steps_split_decode_steps_from_steps_with_prompts(self):
        path = self.write("load_c256.txt", load_output(256, 8, 8, "900.0", 1024, "128.0"))
        m = 'model="m"'

        def scrape(steps, seconds, decode_steps, decode_seconds):
            return exposition(steps, seconds, 0, 0) + "\n".join([
                f'flashserve_engine_decode_step_seconds_bucket{{{m},le="0.0025"}} {decode_steps}',
                f"flashserve_engine_decode_step_seconds_sum{{{m}}} {decode_seconds}",
                f"flashserve_engine_decode_step_seconds_count{{{m}}} {decode_steps}"]) + "\n"

        # An older server (no decode-step histogram): nothing, and "-" in the table.
        self.write("load_c256.before.prom", exposition(10, 0.1, 0, 0))
        self.write("load_c256.after.prom", exposition(1110, 3.4, 0, 0))
        self.assertEqual(summarize.engine_steps(path), {})
        # 1,100 steps in 3.3 s, of which 960 decode-only steps in 2.208 s: 2.3 ms each; the 140
        # others (prefill chunks) 1.092 s, 7.8 ms each.
        self.write("load_c256.before.prom", scrape(10, 0.1, 6, 0.012))
        self.write("load_c256.after.prom", scrape(1110, 3.4, 966, 2.22))
        got = summarize.engine_steps(path)
        self.assertEqual(got["decode_steps"], 960)
        self.assertAlmostEqual(got["decode_step_ms"], 2.3)
        self.assertEqual(got["prompt_steps"], 140)
        self.assertAlmostEqual(got["prompt_step_ms"], 7.8)
        row = summarize.parse_load_output(path)
        row.update(got)
        self.assertTrue(summarize.format_row(row).endswith("| 960 / 2.300 | 140 / 7.800 |"))
        # No step with prompts in the window: its count is 0 and its mean "-".
        self.write("load_c256.after.prom", scrape(970, 2.308, 966, 2.22))
        got = summarize.engine_steps(path)
        self.assertEqual(got["prompt_steps"], 0)
        self.assertIsNone(got["prompt_step_ms"])
        self.assertEqual(summarize.steps_cell(got["prompt_steps"], got["prompt_step_ms"]), "0 / -")

    def test_weight_bytes_reads_the_start_up_line_of_either_weights_format(self):
        # The CUDA runner's line (model/cuda/device_weights.cc summary()), as a server logs it.
        bf16 = self.write("bf16.log", "flashserve: info: model loaded: m (llama: 32 layers, ...) "
                          "on cuda; cuda: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB): weights bf16 "
                          "13.75 GiB; KV cache 14181 blocks x 64 tokens\n")
        self.assertEqual(summarize.weight_bytes(bf16), 13.75 * 2**30)
        native = self.write("native.log", "cuda: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB): weights "
                            "native (Q4_K, Q6_K) 4.16 GiB + bf16/fp32 0.25 GiB; KV cache 15348 "
                            "blocks x 64 tokens\n")
        self.assertEqual(summarize.weight_bytes(native), (4.16 + 0.25) * 2**30)

    def test_gpu_samples_beside_a_load_output(self):
        path = self.write("load_c256.txt", load_output(256, 8, 8, "900.0", 1024, "128.0"))
        self.assertEqual(summarize.gpu_samples(path), {})  # no samples: a CPU server
        # Four samples (the [N/A] line and the kill's message are skipped): median clock of
        # 1500, 1700, 1800, 1980 = 1750; mean power of 600, 700, 650, 650 = 650; held by power:
        # 0x4 and 0x84 (0x1, idle, and 0x20, thermal, are not) = 2 of 4.
        self.write("load_c256.smi.csv", "1500, 600.0, 0x0000000000000004\n"
                   "1700, 700.0, 0x0000000000000084\n"
                   "1980, 650.0, 0x0000000000000001\n"
                   "[N/A], [N/A], [N/A]\n"
                   "1800, 650.0, 0x0000000000000020\n"
                   "Killed\n")
        g = summarize.gpu_samples(path)
        self.assertEqual(g["sm_mhz"], 1750.0)
        self.assertAlmostEqual(g["gpu_w"], 650.0)
        self.assertAlmostEqual(g["power_capped"], 0.5)
        out = os.path.join(self.dir.name, "results.md")
        run = subprocess.run([sys.executable, SUMMARIZE, "--label", "L", "--new-tokens", "128",
                              "--out", out, path], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("| SM MHz | GPU W | power-capped |", text)
        self.assertIn("| 1750 | 650 | 50% |", text)

    def test_table_mode_reports_short_and_failed_runs(self):
        good = self.write("a.txt", load_output(1, 4, 4, "500.0", 512, "128.0"))
        short = self.write("b.txt", load_output(2, 8, 7, "900.0", 700, "100.0"))
        out = os.path.join(self.dir.name, "results.md")
        run = subprocess.run([sys.executable, SUMMARIZE, "--label", "L", "--new-tokens", "128",
                              "--out", out, good, short], capture_output=True, text=True)
        self.assertEqual(run.returncode, 1, run.stderr)
        with open(out, encoding="utf-8") as f:
            text = f.read()
        self.assertIn("1 of 8 requests failed", text)
        self.assertIn("100.0 tokens per request, not 128", text)
        self.assertEqual(text.count("\n| "), 3)  # header + two rows

    def test_metrics_table_gives_the_loss_per_concurrency(self):
        on = [self.write(f"on_r{i}_c{c}.txt", load_output(c, 32, 32, tps, 4096, "128.0"))
              for i, (c, tps) in enumerate([(1, "990.0"), (1, "1010.0"), (256, "47000.0"),
                                            (256, "49000.0")])]
        off = [self.write(f"off_r{i}_c{c}.txt", load_output(c, 32, 32, tps, 4096, "128.0"))
               for i, (c, tps) in enumerate([(1, "1000.0"), (1, "1000.0"), (256, "50000.0"),
                                             (256, "50000.0")])]
        text, problems = summarize.metrics_table("M", on, off)
        self.assertEqual(problems, [])
        self.assertIn("| 1 | 1,000.0 (990, 1,010) | 1,000.0 (1,000, 1,000) | +0.00 % |", text)
        self.assertIn("| 256 | 48,000.0 (47,000, 49,000) | 50,000.0 (50,000, 50,000) | +4.00 % |",
                      text)
        _, problems = summarize.metrics_table("M", on, [])
        self.assertEqual(len(problems), 2)  # neither concurrency has an off run


if __name__ == "__main__":
    unittest.main()
