#!/usr/bin/env bash
# Session 50, call C (any Hopper GPU; carry .chunks/s50; ~575 s): RESULTS.md's run of v32's
# bundle (gpu-check info, tests, bench, peers; then sanitize-full with the time left).
C=${CHUNKS:-.chunks/s50}
rm -rf .gpu /tmp/b_c /tmp/c && mkdir -p /tmp/b_c /tmp/c && tar -xJf "$C/v32.txz" -C /tmp/b_c && cp -r /tmp/b_c/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/c.tgz.part" -C /tmp c && mv "$OUT/c.tgz.part" "$OUT/c.tgz"; done ) &
saver=$!
bench/attention/results_run.sh /tmp/c/r "$(cat "$C/v32.commit")" "${1:-570}"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/c.tgz" -C /tmp c
