#!/usr/bin/env bash
# Copies executables and the shared libraries they load into one folder, so that a program
# built on this Debian machine runs on a GPU host that has the NVIDIA driver and the CUDA
# toolkit but none of our development libraries (gRPC, protobuf, Abseil, prometheus-cpp...).
# Left out: the C runtime, the NVIDIA driver and the CUDA toolkit libraries (cuBLAS and friends
# are hundreds of MB and the GPU host has CUDA 13). Debug info is stripped from the copies.
#
#   scripts/gpu-bundle.sh OUT_DIR EXECUTABLE...
#
# On the GPU host:  LD_LIBRARY_PATH=OUT_DIR/lib:/usr/local/cuda/lib64 OUT_DIR/bin/NAME ...
# Keep OUT_DIR git-ignored (e.g. .gpu/, listed in .gitignore) and carry it explicitly.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR EXECUTABLE..." >&2; exit 2; }
out=$1; shift
mkdir -p "$out/bin" "$out/lib"
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libnvidia|libcublas|libcudart|libcurand|libcufft|libcusparse|libcusolver|libnvrtc|libnvJitLink|libcudnn|libnccl)'
for exe in "$@"; do
  [[ -f $exe && -x $exe ]] || { echo "gpu-bundle: not an executable: $exe" >&2; exit 2; }
  cp -f "$exe" "$out/bin/"
  strip --strip-debug "$out/bin/$(basename "$exe")"
  ldd "$exe" | awk '/=>/ && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    cp -fL "$path" "$out/lib/$name"
    strip --strip-debug "$out/lib/$name" 2>/dev/null || true
  done
done
echo "gpu-bundle: $(ls "$out/bin" | wc -l) executables, $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1)"
