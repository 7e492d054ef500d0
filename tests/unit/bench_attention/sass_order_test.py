#!/usr/bin/env python3
"""Tests of bench/attention/sass_order.py on hand-written cuobjdump lines: the events it keeps,
how runs collapse, and the rule that flags a P V wait placed before the softmax."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "attention"))
import sass_order  # noqa: E402


def line(addr, text):
    return f"        /*{addr:04x}*/                   {text} ;   /* 0x000fe200078e00ff */"


def kernel(*texts):
    return [line(16 * i, t) for i, t in enumerate(texts)]


LOOP_HEAD = ["BAR.SYNC.DEFER_BLOCKING R13, 0x100", "WARPGROUP.ARRIVE",
             "HGMMA.64x128x16.F32.BF16 R88, gdesc[UR12], RZ, !UPT",
             "HGMMA.64x128x16.F32.BF16 R24, R156, gdesc[UR12].tnspB, R24, gsb0",
             "WARPGROUP.DEPBAR.LE gsb0, 0x1", "FMNMX R13, R89, R88, !PT"]
EXPS = ["MUFU.EX2 R88, R88", "MUFU.EX2 R89, R89", "@!P0 MUFU.EX2 R90, R90"]


class SassOrderTest(unittest.TestCase):
    def test_events_keep_turns_gemms_waits_and_exponentials_only(self):
        seq = sass_order.events(kernel(
            "BAR.SYNC.DEFER_BLOCKING 0x0",  # the CTA-wide barrier is not a turn
            *LOOP_HEAD, *EXPS, "F2FP.BF16.F32.PACK_AB R156, R89, R88",
            "WARPGROUP.DEPBAR.LE gsb0, 0x0", "EXIT"))
        self.assertEqual(seq, [["turn", 1], ["HGMMA", 2], ["wait<=1", 1], ["EX2", 3],
                               ["wait<=0", 1]])

    def test_softmax_between_the_waits_is_the_intended_overlap(self):
        seq = sass_order.events(kernel(*LOOP_HEAD, *EXPS, "WARPGROUP.DEPBAR.LE gsb0, 0x0",
                                       "WARPGROUP.DEPBAR.LE gsb0, 0x0"))
        self.assertFalse(sass_order.overlap_broken(seq))

    def test_p_v_wait_before_the_softmax_is_flagged(self):
        seq = sass_order.events(kernel(*LOOP_HEAD, "WARPGROUP.DEPBAR.LE gsb0, 0x0", *EXPS))
        self.assertTrue(sass_order.overlap_broken(seq))

    def test_first_tile_wait_then_softmax_is_not_flagged(self):
        # The first tile has S alone: wait<=0 then the exponentials is its only order.
        seq = sass_order.events(kernel("BAR.SYNC.DEFER_BLOCKING R6, 0x100",
                                       "HGMMA.64x128x16.F32.BF16 R88, gdesc[UR12], RZ, !UPT",
                                       "WARPGROUP.DEPBAR.LE gsb0, 0x0", *EXPS))
        self.assertFalse(sass_order.overlap_broken(seq))


if __name__ == "__main__":
    unittest.main()
