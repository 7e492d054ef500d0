#!/usr/bin/env bash
# The bundles of calls B, Z4 and Z5 (results/session57/call*.sh), rebuilt from commits and
# patches: a new checkout has no .chunks/ (session 59 found session 58's bundles gone). In the
# order the calls need them, one worktree and one build folder:
#   v51 = 7955020 as committed (RESULTS.md's commit; call B's bundle and the base of Z4 and Z5),
#   v52 = HEAD + results/session57/v52_d128_split_208_88.patch,
#   v48 / v49 = HEAD + session 54's three / four K/V stage patches, regenerated on HEAD here
#   (results/session59/v4[89]_*.patch: the same changed lines, only the context moved).
# HEAD's kernels are 7955020's machine code: same_sass.py of v51 against v52 (the d64 kernels)
# and against v48 (the d128 ones) finds only the patched kernels differing (NOTES.md
# "Session 59"). ~6.5 min on 2 cores for the four.
# Call B can start once v51.txz is written (carry that one file); the rest follow.
#
#   bench/attention/results/session59/bundles.sh [OUT_DIR]     (default .chunks/s57z)
here=bench/attention/results
exec bench/attention/bundles_from_patches.sh "${1:-.chunks/s57z}" v51@7955020 \
  v52=$here/session57/v52_d128_split_208_88.patch \
  v48=$here/session59/v48_d64_three_stages.patch v49=$here/session59/v49_d64_four_stages.patch
