#!/usr/bin/env bash
# Session 50, call E (any Hopper GPU; carry .chunks/s50): RESULTS.md's run of v33's
# bundle (gpu-check info, tests, bench, peers; then sanitize-full with the time left).
C=${CHUNKS:-.chunks/s50}
rm -rf .gpu /tmp/b_e /tmp/e && mkdir -p /tmp/b_e /tmp/e && tar -xJf "$C/v33.txz" -C /tmp/b_e && cp -r /tmp/b_e/.gpu .gpu
( while sleep 30; do tar -czf "$OUT/e.tgz.part" -C /tmp e && mv "$OUT/e.tgz.part" "$OUT/e.tgz"; done ) &
saver=$!
bench/attention/results_run.sh /tmp/e/r "$(cat "$C/v33.commit")" "${1:-570}"
kill $saver; wait $saver 2>/dev/null
tar -czf "$OUT/e.tgz" -C /tmp e
