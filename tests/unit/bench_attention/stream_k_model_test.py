#!/usr/bin/env python3
"""Runs bench/attention/stream_k_model.py (the stream-K walk's partition and hand-over, no GPU)
on its fixed cases and 500 random ones, and checks that it catches a broken walk."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "attention"))
import stream_k_model  # noqa: E402


class StreamKModelTest(unittest.TestCase):
    def test_the_walk_keeps_every_property(self):
        sys.argv = ["stream_k_model.py", "500"]
        stream_k_model.main()

    def test_a_walk_that_gives_a_piece_to_two_ctas_is_caught(self):
        # 144 tiles of 9 key tiles over 132 CTAs (12 tiles left in 1-unit pieces): CTA 1 given
        # CTA 0's last piece as well must fail check().
        real_walk = stream_k_model.walk

        def overlapping(tiles, grid, units):
            items, start, rounds = real_walk(tiles, grid, units)
            items[1] = items[1] + items[0][-1:]
            return items, start, rounds
        stream_k_model.check(144, 132, 9, lambda l: 9)
        stream_k_model.walk = overlapping
        try:
            with self.assertRaises(AssertionError):
                stream_k_model.check(144, 132, 9, lambda l: 9)
        finally:
            stream_k_model.walk = real_walk


if __name__ == "__main__":
    unittest.main()
