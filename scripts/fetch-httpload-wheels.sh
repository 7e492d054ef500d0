#!/usr/bin/env bash
# Downloads the wheels that bench/serving/http_load.sh needs on the GPU machine (guidellm, the
# openai client, gguf and what the device image lacks of their requirements: the list and why
# in bench/serving/requirements-httpload.txt), for CPython 3.12 on manylinux x86_64, each
# checked against its pinned sha256. The GPU machine reaches no registry: carry OUT_DIR.
# SET=aiperf fetches the HTTP_CLIENT=aiperf set instead (bench/serving/requirements-aiperf.txt:
# NVIDIA's aiperf and what it needs; 13.8 MB), SET=both the two (they share pins: one copy).
#
#   [SET=guidellm|aiperf|both] scripts/fetch-httpload-wheels.sh [OUT_DIR]
#                                        (OUT_DIR default .whl, git-ignored: keep it so)
#
# There: python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site OUT_DIR/*.whl
set -euo pipefail
out=${1:-.whl}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
         manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
case ${SET:-guidellm} in
  guidellm) sets=(httpload) ;;
  aiperf) sets=(aiperf) ;;
  both) sets=(httpload aiperf) ;;
  *) echo "$0: SET must be guidellm, aiperf or both, not '$SET'" >&2; exit 2 ;;
esac
for set in "${sets[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${platforms[@]}" --require-hashes \
    -r "$here/bench/serving/requirements-$set.txt" -d "$out"
done
echo "fetch-httpload-wheels: $(ls "$out"/*.whl | wc -l) wheels in $out, $(du -ch "$out"/*.whl | tail -1 | cut -f1)"
