#!/usr/bin/env python3
"""Tests of bench/serving/http_load_summary.py's guidellm reading: several processes counted
over the window in which all of them ran, on hand-written reports whose answers are worked
out in the test."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "serving"))
import http_load_summary as summary  # noqa: E402


def request(start, ttft_ms, end, tokens):
    return {"request_start_time": start, "time_to_first_token_ms": ttft_ms,
            "request_end_time": end, "output_tokens": tokens}


def report(start, end, requests, concurrency=1.0, errored=0):
    return {"benchmarks": [{
        "start_time": start, "end_time": end, "duration": end - start,
        "requests": {"successful": requests},
        "metrics": {"request_totals": {"errored": errored, "incomplete": 0},
                    "request_concurrency": {"successful": {"mean": concurrency}}},
    }]}


class TokensWithin(unittest.TestCase):
    def test_first_token_then_evenly_spaced(self):
        # 11 tokens: the first at t = 1.0, the other 10 evenly over (1, 2].
        r = request(0.0, 1000.0, 2.0, 11)
        self.assertAlmostEqual(summary.tokens_within(r, 0.0, 10.0), 11.0)
        self.assertAlmostEqual(summary.tokens_within(r, 1.5, 10.0), 5.0)
        self.assertAlmostEqual(summary.tokens_within(r, 0.0, 1.5), 6.0)
        self.assertEqual(summary.tokens_within(r, 2.5, 3.0), 0.0)
        self.assertEqual(summary.tokens_within(r, 0.0, 0.5), 0.0)


class ReadGuidellm(unittest.TestCase):
    def write(self, directory, name, data):
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        return path

    def test_one_process_is_its_whole_run(self):
        with tempfile.TemporaryDirectory() as d:
            # Two requests of 100 tokens, TTFTs 10 and 30 ms, in a 2 s run.
            p = self.write(d, "a.json", report(0.0, 2.0, [request(0.0, 10.0, 1.0, 100),
                                                         request(1.0, 30.0, 2.0, 100)]))
            rate, ttft, failed, in_flight, window, span = summary.read_guidellm(p, 100)
        self.assertAlmostEqual(rate, 100.0)
        self.assertEqual(ttft, 10.0)  # the lower median
        self.assertEqual((failed, window, span), (0, 2.0, 2.0))

    def test_staggered_processes_count_only_their_common_window(self):
        with tempfile.TemporaryDirectory() as d:
            # Process a runs [0, 10], b runs [4, 14]: common window [4, 10], span 14. Each
            # streams 101 tokens a request over 1 s (first at start + 0, then 100 over 1 s),
            # back to back: 100 tokens/s each, 200 together within the window.
            a = [request(float(t), 0.0, t + 1.0, 101) for t in range(10)]
            b = [request(float(t), 0.0, t + 1.0, 101) for t in range(4, 14)]
            pa = self.write(d, "a.json", report(0.0, 10.0, a, concurrency=1.0))
            pb = self.write(d, "b.json", report(4.0, 14.0, b, concurrency=1.0))
            rate, _, failed, in_flight, window, span = summary.read_guidellm(f"{pa},{pb}", 101)
        # Within [4, 10]: a's requests 4-9 and b's 4-9 whole (12 x 101 tokens); a's request
        # 3 ends at 4.0 with all its tokens at or before it (its first at 3.0: none inside);
        # b's request 10 puts its first token at 10.0, on the boundary (1), the rest after.
        self.assertAlmostEqual(rate, (12 * 101 + 1) / 6.0)
        self.assertEqual((failed, in_flight, window, span), (0, 2.0, 6.0, 14.0))

    def test_a_short_common_window_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            pa = self.write(d, "a.json", report(0.0, 10.0, [request(0.0, 0.0, 10.0, 10)]))
            pb = self.write(d, "b.json", report(8.0, 18.0, [request(8.0, 0.0, 18.0, 10)]))
            with self.assertRaisesRegex(ValueError, "ran together 2.0 s of 18.0 s"):
                summary.read_guidellm(f"{pa},{pb}", 10)

    def test_short_and_errored_requests_count_as_failed(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.write(d, "a.json", report(0.0, 2.0, [request(0.0, 5.0, 1.0, 100),
                                                         request(1.0, 5.0, 2.0, 99)],
                                               errored=2))
            _, _, failed, _, _, _ = summary.read_guidellm(p, 100)
        self.assertEqual(failed, 3)


if __name__ == "__main__":
    unittest.main()
