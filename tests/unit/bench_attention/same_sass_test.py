#!/usr/bin/env python3
"""Tests of bench/attention/same_sass.py and sass.py on hand-written cuobjdump lines: kernels
split by name and architecture, addresses and encodings dropped, and
the anonymous-namespace hashes (two checkouts' only difference) blanked in names and code,
while a changed instruction still differs."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "attention"))
import same_sass  # noqa: E402
import sass  # noqa: E402


def line(addr, text, enc="0x000fe200078e00ff"):
    return f"        /*{addr:04x}*/                   {text} ;   /* {enc} */"


def dump(name, *texts):
    return [f"\t\tFunction : {name}",
            '\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS"'] + \
        [line(16 * i, t) for i, t in enumerate(texts)]


ANON_A = "_ZN41_GLOBAL__N__3f9c2a1b_17_attention_bench_cu_8d0e44c210fill_naiveEPf"
ANON_B = "_ZN41_GLOBAL__N__77aa01ce_17_attention_bench_cu_1b2c3d4e10fill_naiveEPf"


class SameSassTest(unittest.TestCase):
    def test_split_by_name_and_architecture(self):
        lines = (["arch = sm_80"] + dump("k_a", "MOV R1, R2", "EXIT") +
                 ["arch = sm_90a"] + dump("k_a", "MOV R1, R3", "EXIT") + dump("other", "EXIT"))
        got = sass.split(lines, "k_")
        self.assertEqual(sorted(got), ["k_a [sm_80]", "k_a [sm_90a]"])
        self.assertEqual(same_sass.code(got["k_a [sm_80]"]), ["MOV R1, R2", "EXIT"])
        self.assertEqual(same_sass.code(got["k_a [sm_90a]"]), ["MOV R1, R3", "EXIT"])

    def test_addresses_encodings_and_anonymous_hashes_do_not_count(self):
        a = same_sass.code([line(0, f"CALL.ABS.NOINC `({ANON_A})"), line(16, "EXIT")])
        b = same_sass.code([line(0x20, f"CALL.ABS.NOINC `({ANON_B})", "0x000fea0003800000"),
                            line(0x30, "EXIT", "0x1")])
        self.assertEqual(a, b)
        self.assertEqual(same_sass.blank(ANON_A), same_sass.blank(ANON_B))

    def test_a_changed_register_or_opcode_differs(self):
        a = same_sass.code([line(0, "IMAD R1, R2, R3, RZ"), line(16, "STL [R1], R4")])
        self.assertNotEqual(a, same_sass.code([line(0, "IMAD R1, R2, R5, RZ"),
                                               line(16, "STL [R1], R4")]))
        self.assertEqual(same_sass.spills(a), (0, 1))
        self.assertEqual(same_sass.spills(same_sass.code([line(0, "LDL.64 R2, [R1]")])), (1, 0))

    def test_other_hex_in_a_name_is_kept(self):
        # Only the two 8-digit groups of an anonymous namespace are blanked.
        self.assertNotEqual(same_sass.blank("k_1234abcd"), same_sass.blank("k_5678abcd"))


if __name__ == "__main__":
    unittest.main()
