#!/usr/bin/env bash
# Call Z5 (session 57, for session 58; any Hopper GPU; carry .chunks/s57z; ~360 s): session 54's
# call Z on the head: v48 (three K/V stages at d64) and v49 (four) against v51 (the head's
# kernels), on the d64 rows only (`--head-dim=64`: the d128 kernels of all three are the same
# machine code). Bundles (results/session59/bundles.sh): v51.txz is 7955020's; v48.txz and v49.txz are the
# head with session 54's patches applied (regenerated on the head as
# results/session59/v48_d64_three_stages.patch, v49_d64_four_stages.patch: only their context
# moved). Predictions and rules: NOTES.md "v48 and v49 on v51" (written
# before the call); session 54's rule_v48_v49.py with RULE_BASE=v51. As call Z: the tests of v48 and v49, 7 alternating
# s512 rounds, 2 rounds past 512 keys, memcheck + racecheck of v49, then the rules.
RULE_BASE=v51 BENCH_EXTRA=--head-dim=64 bench/attention/stack_call.sh z5 "${CHUNKS:-.chunks/s57z}" \
  "v51 v48 v49" bench/attention/results/session54/rule_v48_v49.py
