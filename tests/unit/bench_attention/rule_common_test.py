#!/usr/bin/env python3
"""Tests of bench/attention/rule_common.py on hand-written alternate_bench.sh folders: each
row's per-round ratio of the measured column and its median, kAuto's column by key count,
the control's verdict (its rows' median, not one noisy row), the adopt file, and the
two-region rule of a stack step (short_and_long: s512 and past 512 keys)."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "attention"))
import rule_common  # noqa: E402

HEAD = "kind,config,impl,ms,tflops,gbps\n"


class RuleCommonTest(unittest.TestCase):
    def folder(self, runs):
        """runs: {(build, round): [(config, impl, ms)]} -> a folder of bench_BUILD_ROUND.csv."""
        d = tempfile.mkdtemp()
        for (b, r), rows in runs.items():
            with open(os.path.join(d, f"bench_{b}_{r}.csv"), "w") as f:
                f.write(HEAD + "".join(f"prefill,{c},{i},{ms},1,1\n" for c, i, ms in rows))
        return d

    def run_quiet(self, fn, *args, **kw):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            res = fn(*args, **kw)
        return res, out.getvalue()

    def test_medians_of_the_rounds_and_kautos_column_by_keys(self):
        # s512 reads wgmma_ps (<= 512 keys), s1024 wgmma; the control is mma.
        def rows(ps, one, mma):
            return [("b32 s512 h32 d64 causal", "wgmma", 9.0), ("b32 s512 h32 d64 causal", "wgmma_ps", ps),
                    ("b32 s512 h32 d64 causal", "mma", mma),
                    ("b16 s1024 h32 d64 causal", "wgmma", one), ("b16 s1024 h32 d64 causal", "mma", mma)]
        d = self.folder({("a", 1): rows(1.0, 2.0, 1.0), ("b", 1): rows(0.5, 2.0, 1.0),
                         ("a", 2): rows(1.0, 2.0, 1.0), ("b", 2): rows(1.0, 1.0, 1.0),
                         ("a", 3): rows(1.0, 2.0, 1.0), ("b", 3): rows(0.8, 1.6, 1.0)})
        (full, cmed), _ = self.run_quiet(rule_common.compare, d, "a", "b",
                                         lambda b, k: rule_common.kauto(512)(k), lambda b, k: "mma")
        # s512: ratios 2.0, 1.0, 1.25 -> median 1.25; s1024: 1.0, 2.0, 1.25 -> 1.25
        self.assertEqual(full, {"b32 s512 h32 d64 causal": 1.25, "b16 s1024 h32 d64 causal": 1.25})
        self.assertEqual(cmed, {"b32 s512 h32 d64 causal": 1.0, "b16 s1024 h32 d64 causal": 1.0})

    def test_a_persistent_class_change_reads_each_builds_own_class(self):
        # s1024: the base's kAuto runs wgmma (class <= 512), the new one's wgmma_ps (<= 1,024);
        # the control is wgmma; a row past max_keys is left out.
        def rows(one, ps):
            return [("b16 s1024 h32 d64 causal", "wgmma", one), ("b16 s1024 h32 d64 causal", "wgmma_ps", ps),
                    ("b8 s2048 h32 d64 causal", "wgmma", one), ("b8 s2048 h32 d64 causal", "wgmma_ps", ps)]
        d = self.folder({("a", 1): rows(2.0, 3.0), ("b", 1): rows(2.0, 1.6)})
        (full, cmed), _ = self.run_quiet(rule_common.persistent_class, d, "a", "b", 512, 1024)
        self.assertEqual(full, {"b16 s1024 h32 d64 causal": 1.25})
        self.assertEqual(cmed, {"b16 s1024 h32 d64 causal": 1.0})

    def test_a_row_missing_a_round_makes_the_call_inconclusive(self):
        d = self.folder({("a", 1): [("x s512 ", "wgmma", 1.0), ("x s512 ", "mma", 1.0)],
                         ("b", 1): [("x s512 ", "mma", 1.0)]})
        res, out = self.run_quiet(rule_common.compare, d, "a", "b", lambda b, k: "wgmma", lambda b, k: "mma")
        self.assertIsNone(res)
        self.assertIn("RULE: inconclusive", out)

    def test_the_control_drifts_by_its_median_not_by_one_row(self):
        drifted, out = self.run_quiet(rule_common.control_drifted, {"r1": 1.0, "r2": 1.01, "r3": 1.2})
        self.assertFalse(drifted)
        self.assertIn("rows outside 0.97-1.03 (noise, not the rule): r3", out)
        drifted, _ = self.run_quiet(rule_common.control_drifted, {"r1": 1.03, "r2": 1.04, "r3": 1.0})
        self.assertTrue(drifted)

    def test_verdict_writes_adopt_only_when_adopted_and_not_drifted(self):
        for drifted, adopted, line, written in ((False, True, "RULE: v9 adopted", True),
                                                (True, True, "RULE: inconclusive (controls drifted)", False),
                                                (False, False, "RULE: v9 not adopted", False)):
            d = tempfile.mkdtemp()
            _, out = self.run_quiet(rule_common.verdict, d, "v9", drifted, adopted)
            self.assertEqual(out.strip(), line)
            self.assertEqual(os.path.exists(os.path.join(d, "adopt")), written)

    def test_kauto_v32_restates_the_choice_table(self):
        k = rule_common.kauto_v32
        self.assertEqual(k("b32 s512 h32 d64 full"), "wgmma_ps")
        self.assertEqual(k("b4 s4096 h32 d64 causal"), "wgmma_ps")
        self.assertEqual(k("b2 s8192 h32 d64 full"), "wgmma")
        self.assertEqual(k("b2 s8192 h16 d128 full"), "wgmma_ps")      # stream-K to 8,192
        self.assertEqual(k("b2 s8192 h16 d128 causal"), "wgmma")
        self.assertEqual(k("b1 s16384 h16 d128 full"), "wgmma")
        self.assertEqual(k("b2 s8192 h16 d128 causal w512"), "wgmma")
        self.assertEqual(k("b64 varlen64-1024 t32299 h9/3 d64 causal"), "wgmma_ps")
        self.assertEqual(k("b1 q512 ctx1024 h9/3 d64 causal"), "wgmma")   # split
        self.assertEqual(k("b1 q512 ctx2048 h32/8 d128 causal"), "wgmma")  # 128 tiles, unsplit
        self.assertEqual(k("b8 q512 ctx2048 h32/8 d128 causal"), "wgmma_ps")
        self.assertEqual(k("b8 q512 ctx4096 h32/8 d128 causal"), "wgmma")  # 4,608 keys

    def test_kauto_v33_stops_every_class_at_4096_keys(self):
        k = rule_common.kauto_v33
        self.assertEqual(k("b4 s4096 h16 d128 full"), "wgmma_ps")
        self.assertEqual(k("b2 s8192 h16 d128 full"), "wgmma")
        self.assertEqual(k("b8 q512 ctx2048 h32/8 d128 causal"), "wgmma_ps")

    def test_kauto_v34_grows_d64_causal_and_d128_full(self):
        k = rule_common.kauto_v34
        self.assertEqual(k("b2 s8192 h16 d128 full"), "wgmma_ps")
        self.assertEqual(k("b1 s16384 h16 d128 full"), "wgmma")
        self.assertEqual(k("b1 s16384 h32 d64 causal"), "wgmma_ps")
        self.assertEqual(k("b8 q512 ctx8192 h9/3 d64 causal"), "wgmma_ps")  # 216 tiles
        self.assertEqual(k("b1 q512 ctx8192 h9/3 d64 causal"), "wgmma")  # split
        self.assertEqual(k("b2 s8192 h32 d64 full"), "wgmma")
        self.assertEqual(k("b2 s8192 h16 d128 causal"), "wgmma")
        self.assertEqual(k("b1 s8192 h32 d64 causal w512"), "wgmma")

    def test_max_keys_of_grid_chunk_and_varlen_rows(self):
        self.assertEqual(rule_common.max_k("b32 s512 h32 d64 full"), 512)
        self.assertEqual(rule_common.max_k("b1 q512 ctx1024 h9/3 d64 causal"), 1536)
        self.assertEqual(rule_common.max_k("b64 varlen64-1024 t32299 h9/3 d64 causal"), 1024)


    def stack_folder(self, short_speedup, long_speedup, long_rounds):
        """DIR/s512 and DIR/long of builds a and b: b's Hopper kernels faster by the factors,
        the control (mma) even; three s512 rows (two bf16, one fp16), two rows past 512."""
        def short(f):
            return [(c, i, ms / f if i == "wgmma_ps" else ms)
                    for c in ("b32 s512 h32 d64 causal", "b32 s512 h16 d128 causal",
                              "b32 s512 h32 d64 causal fp16")
                    for i, ms in (("wgmma", 9.0), ("wgmma_ps", 1.0), ("mma", 2.0))]

        def long_(f):
            return [(c, i, ms / f if i != "mma" else ms)
                    for c in ("b16 s1024 h16 d128 causal", "b8 s2048 h16 d128 causal")
                    for i, ms in (("wgmma", 1.0), ("wgmma_ps", 1.0), ("mma", 2.0))]
        d = tempfile.mkdtemp()
        os.rename(self.folder({(b, r): short(short_speedup if b == "b" else 1.0)
                               for b in "ab" for r in (1, 2, 3)}), f"{d}/s512")
        os.rename(self.folder({(b, r): long_(long_speedup if b == "b" else 1.0)
                               for b in "ab" for r in range(1, long_rounds + 1)}), f"{d}/long")
        return d

    def test_a_stack_step_is_adopted_on_both_regions(self):
        d = self.stack_folder(1.02, 1.0, 2)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, f"{d}/b")
        self.assertIn("bf16 rows: median 1.020; all rows: lowest 1.020", out)
        self.assertIn("past 512 keys (2 rounds): median 1.000", out)
        self.assertTrue(out.rstrip().endswith("RULE: b adopted"), out)
        self.assertTrue(os.path.exists(f"{d}/b/adopt"))
        self.assertFalse(os.path.exists(f"{d}/adopt"))

    def test_a_stack_step_below_its_short_bar_or_losing_past_512_is_not_adopted(self):
        for short, long_ in ((1.005, 1.0), (1.02, 0.96)):
            d = self.stack_folder(short, long_, 2)
            _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01)
            self.assertTrue(out.rstrip().endswith("RULE: b not adopted"), out)
            self.assertFalse(os.path.exists(f"{d}/adopt"))

    def test_a_long_clause_that_fails_keeps_a_stack_step_out(self):
        d = self.stack_folder(1.02, 1.0, 2)
        seen = []

        def clause(full):
            seen.append(sorted(full))
            return min(full.values()) >= 1.01
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, None, clause)
        self.assertEqual(seen, [["b16 s1024 h16 d128 causal", "b8 s2048 h16 d128 causal"]])
        self.assertTrue(out.rstrip().endswith("RULE: b not adopted"), out)
        d = self.stack_folder(1.02, 1.02, 2)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, None, clause)
        self.assertTrue(out.rstrip().endswith("RULE: b adopted"), out)

    def test_short_rows_pick_the_rows_of_the_s512_bar(self):
        d = self.stack_folder(1.02, 1.0, 2)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, None, None,
                                lambda k: "d128" in k)
        self.assertIn("bf16 rows (b32 s512 h16 d128 causal): median 1.020", out)
        self.assertTrue(out.rstrip().endswith("RULE: b adopted"), out)
        d = self.stack_folder(1.02, 1.0, 2)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, None, None,
                                lambda k: "full" in k)
        self.assertIn("none of the bar's rows came back", out)
        self.assertTrue(out.rstrip().endswith("RULE: b not adopted"), out)

    def test_judged_rows_leave_the_others_out_of_both_regions(self):
        # b's d128 rows lose 3 % (noise, when their kernels are unchanged); its d64 rows gain.
        d = self.stack_folder(1.02, 1.0, 2)
        for sub in ("s512", "long"):
            for f in os.listdir(f"{d}/{sub}"):
                if f.startswith("bench_b_"):
                    path = f"{d}/{sub}/{f}"
                    lines = open(path).read().splitlines(True)
                    with open(path, "w") as out:
                        for line in lines:
                            c = line.split(",")
                            if "d128" in line and c[2] != "mma":
                                c[3] = str(float(c[3]) / 0.97 * (1.02 if sub == "s512" else 1.0))
                            out.write(",".join(c) if len(c) > 3 else line)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01)
        self.assertTrue(out.rstrip().endswith("RULE: b not adopted"), out)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01, None, None,
                                judged=lambda k: "d64" in k)
        self.assertNotIn("d128", out)
        self.assertIn("bf16 rows: median 1.020; all rows: lowest 1.020", out)
        self.assertIn("past 512 keys: not read", out)  # the long rows are all d128 here
        self.assertTrue(out.rstrip().endswith("RULE: inconclusive (controls drifted)"), out)

    def test_the_d128_full_clause_reads_only_those_rows(self):
        clause = rule_common.d128_full_clause(1.01)
        rows = {"b8 s2048 h16 d128 full": 1.02, "b4 s4096 h16 d128 full": 1.00,
                "b2 s8192 h16 d128 full": 1.03, "b8 s2048 h16 d128 causal": 0.90,
                "b8 s2048 h32 d64 full": 0.90}
        ok, out = self.run_quiet(clause, rows)
        self.assertTrue(ok, out)
        self.assertIn("median 1.020 (bar 1.01)", out)
        self.assertNotIn("causal", out)
        ok, out = self.run_quiet(rule_common.d128_full_clause(1.025), rows)
        self.assertFalse(ok, out)
        ok, out = self.run_quiet(clause, {"b8 s2048 h32 d64 full": 1.1})
        self.assertFalse(ok)
        self.assertIn("none read", out)

    def test_a_stack_step_without_its_s512_rounds_is_inconclusive(self):
        d = self.stack_folder(1.02, 1.0, 2)
        for f in os.listdir(f"{d}/s512"):
            if f.startswith("bench_b_"):
                os.remove(f"{d}/s512/{f}")
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01)
        self.assertTrue(out.rstrip().endswith("RULE: inconclusive (controls drifted)"), out)
        self.assertFalse(os.path.exists(f"{d}/adopt"))

    def test_a_stack_step_without_two_long_rounds_is_inconclusive(self):
        d = self.stack_folder(1.02, 1.0, 1)
        _, out = self.run_quiet(rule_common.short_and_long, d, "a", "b", 1.01)
        self.assertIn("past 512 keys: not read (1 rounds came back, 2 needed", out)
        self.assertTrue(out.rstrip().endswith("RULE: inconclusive (controls drifted)"), out)


    def test_a_round_that_only_one_build_ran_is_left_out(self):
        rows = [("b32 s512 h32 d64 causal", i, ms) for i, ms in (("wgmma", 1.0), ("wgmma_ps", 1.0), ("mma", 1.0))]
        fast = [("b32 s512 h32 d64 causal", i, ms) for i, ms in (("wgmma", 1.0), ("wgmma_ps", 0.5), ("mma", 1.0))]
        d = self.folder({("a", 1): rows, ("b", 1): fast, ("a", 2): rows})  # round 2 cut short
        (full, _), out = self.run_quiet(rule_common.compare, d, "a", "b", lambda b, k: "wgmma_ps",
                                        lambda b, k: "mma")
        self.assertIn("rounds: [1]", out)
        self.assertEqual(full, {"b32 s512 h32 d64 causal": 2.0})


if __name__ == "__main__":
    unittest.main()
