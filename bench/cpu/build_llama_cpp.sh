#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, the CPU peer of bench/cpu/RESULTS.md, from the
# llama-cpp-python sdist on PyPI (its vendor/llama.cpp), outside the repository.
#   bench/cpu/build_llama_cpp.sh [DIR]   (DIR defaults to /tmp/llamacpp-peer)
# Prints the path of llama-bench. GGML_NATIVE=OFF with explicit AVX2 / AVX-512 flags: on
# some VMs a -march=native build dies with SIGILL (AMX / AVX512-FP16 advertised, unusable).
# The AVX-512 flags are passed only when /proc/cpuinfo lists avx512f, avx512bw, avx512vl.
set -euo pipefail
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR=${1:-/tmp/llamacpp-peer}
JOBS=${JOBS:-2}
mkdir -p "$DIR"
cd "$DIR"
SDIST=llama_cpp_python-$VERSION.tar.gz
if [[ ! -f $SDIST ]]; then
  pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d . >&2
fi
echo "$SHA256  $SDIST" | sha256sum -c - >&2
[[ -d llama_cpp_python-$VERSION ]] || tar xzf "$SDIST"
SRC=$DIR/llama_cpp_python-$VERSION/vendor/llama.cpp
flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
       -DGGML_BMI2=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
       -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release)
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
   grep -qw avx512vl /proc/cpuinfo; then
  flags+=(-DGGML_AVX512=ON)
  grep -qw avx512_vnni /proc/cpuinfo && flags+=(-DGGML_AVX512_VNNI=ON)
  grep -qw avx512vbmi /proc/cpuinfo && flags+=(-DGGML_AVX512_VBMI=ON)
  grep -qw avx512_bf16 /proc/cpuinfo && flags+=(-DGGML_AVX512_BF16=ON)
fi
cmake -S "$SRC" -B "$DIR/build" "${flags[@]}" >&2
cmake --build "$DIR/build" -j"$JOBS" --target llama-bench >&2
echo "$DIR/build/bin/llama-bench"
