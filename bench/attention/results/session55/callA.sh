#!/usr/bin/env bash
# Call A (session 55, for session 56; any Hopper GPU; carry .chunks/s54z; ~480 s): session 54's
# call Z3 (v51 against v42, every row; its rule rule_v51.py) and call Y (clocks by row: is the
# fp16 d128 full s512 row power-capped?) on one machine, in one call: session 55 lost 901 s of
# its device time to machine starts that failed and then got none, so the next session's first
# start carries the two that answer the most (NOTES.md "Session 55").
H=bench/attention/results/session54
bash $H/callZ3.sh
CHUNKS=${CHUNKS:-.chunks/s54z} bash $H/callY.sh
