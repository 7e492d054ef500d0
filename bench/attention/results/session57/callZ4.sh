#!/usr/bin/env bash
# Call Z4 (session 57, for session 58; any Hopper GPU; carry .chunks/s57z; ~340 s): v52 (d128's
# setmaxnreg split 208 / 88: the persistent walks' producer no longer spills; v50's aim within
# the CTA's 384 x 168 launch registers, which v50's 216 / 80 exceeded and hung) against v51
# (the head's kernels: s57z/v51.txz is 7955020's bundle), on the d128 rows only
# (`--head-dim=128`: the d64 kernels of both are the same machine code). Bundles (results/session59/bundles.sh):
# v51.txz is 7955020's; v52.txz is the head with results/session57/v52_d128_split_208_88.patch
# applied. Prediction and rule: NOTES.md v52
# (written before the call); rule_v52.py. As call Z2: v52's tests, 15 alternating s512 rounds,
# 2 rounds past 512 keys, memcheck + racecheck of v52, then the rule; stack_call.sh ends the
# call if v52's tests fail or hang.
H=bench/attention/results/session57
S512_ROUNDS=15 BENCH_EXTRA=--head-dim=128 bench/attention/stack_call.sh z4 "${CHUNKS:-.chunks/s57z}" \
  "v51 v52" $H/rule_v52.py
