#!/usr/bin/env bash
# One device call that is RESULTS.md's run of a bundle (scripts/gpu-bundle.sh folder tarred:
# tar -cJf NAME.txz -C DIR .gpu; git-ignored): the bundle into .gpu/, then results_run.sh
# (gpu-check's info, tests, bench, peers, then sanitize-full with the time left) into
# /tmp/NAME/r, tarred to $OUT/NAME.tgz every 30 s and at the end. COMMIT names the bundle's
# commit in the summaries (its NAME.commit file beside it).
#
#   bench/attention/results_call.sh NAME BUNDLE.txz COMMIT [DEADLINE]    (DEADLINE default 565)
#
# Then here: bench/attention/musts.py NAME/r/check/table.md and RESULTS.md = header + table.md.
set -u
[[ $# -ge 3 ]] || { echo "usage: $0 NAME BUNDLE.txz COMMIT [DEADLINE]" >&2; exit 2; }
name=$1 bundle=$2 commit=$3 deadline=${4:-565}
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
R=/tmp/$name; rm -rf "$R"; mkdir -p "$R"
save() { tar -czf "$OUT/$name.tgz.part" -C /tmp "$name" && mv "$OUT/$name.tgz.part" "$OUT/$name.tgz"; }
( while sleep 30; do save; done ) > /dev/null 2>&1 &
saver=$!
rm -rf .gpu "/tmp/b_$name" && mkdir -p "/tmp/b_$name" && tar -xJf "$bundle" -C "/tmp/b_$name" &&
  cp -r "/tmp/b_$name/.gpu" .gpu
bench/attention/results_run.sh "$R/r" "$commit" "$deadline"
kill $saver 2>/dev/null; wait $saver 2>/dev/null
save
echo "end $(el) s"
