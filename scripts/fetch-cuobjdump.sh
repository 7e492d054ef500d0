#!/usr/bin/env bash
# Fetches NVIDIA's cuobjdump and the nvdisasm it runs, for reading the machine code (SASS) of
# our kernels on a build machine: the CUDA toolkit here has nvcc and ptxas but not these, and
# the order of a kernel's instructions after ptxas is sometimes the question
# (bench/attention/sass_order.py, bench/attention/NOTES.md v14b). They come from the PyPI wheels
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm 13.5.37, checked by sha256, into the
# git-ignored build/dev-tools/. Not needed to build, test or run anything.
#
#   scripts/fetch-cuobjdump.sh [DEST_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/build/dev-tools}"
version="13.5.37"
declare -A sha256=(
  [cuobjdump]="38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58"
  [nvdisasm]="d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca"
)
stamp="$dest/SOURCE"
want="nvidia-cuda-{cuobjdump,nvdisasm}==$version sha256=${sha256[cuobjdump]},${sha256[nvdisasm]}"
if [ -x "$dest/cuobjdump" ] && [ -x "$dest/nvdisasm" ] && [ -f "$stamp" ] && grep -qxF "$want" "$stamp"; then
  echo "fetch-cuobjdump: $dest present ($version)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"
for tool in cuobjdump nvdisasm; do
  wheel="nvidia_cuda_$tool-$version-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    --platform manylinux2014_x86_64 -d "$tmp" "nvidia-cuda-$tool==$version"
  if ! echo "${sha256[$tool]}  $tmp/$wheel" | sha256sum --check --status; then
    echo "fetch-cuobjdump: sha256 mismatch for $wheel (expected ${sha256[$tool]}, got" \
      "$(sha256sum "$tmp/$wheel" | cut -d' ' -f1))" >&2
    exit 1
  fi
  python3 -m zipfile -e "$tmp/$wheel" "$tmp/$tool"
  install -m 755 "$tmp/$tool/nvidia/cu13/bin/$tool" "$dest/$tool"
done
echo "$want" > "$stamp"
echo "fetch-cuobjdump: $dest/cuobjdump, $dest/nvdisasm ($("$dest/cuobjdump" --version | tail -n1))"
