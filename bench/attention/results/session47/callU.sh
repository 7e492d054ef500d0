#!/usr/bin/env bash
# Prepared in session 47 for the next (any Hopper GPU; carry .chunks/s48; ~400 s): RESULTS.md's
# run at mainline's kernels when call S does not adopt v30 (S runs it for v30 when it does).
#   head.txz = mainline 15606a4 (v28 merged)
# Then here: musts.py on u/r/check/table.md and RESULTS.md = header + table.md.
C=${CHUNKS:-.chunks/s48}
exec bench/attention/results_call.sh u "$C/head.txz" "$(cat "$C/head.commit")" "${1:-565}"
