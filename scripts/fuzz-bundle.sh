#!/usr/bin/env bash
# Packs the libFuzzer targets (tests/fuzz, built as scripts/fuzz.sh builds them: clang + ASan +
# UBSan) for a long run on a bigger Linux machine that has none of our libraries and no network
# (the GPU host: 16 cores). The bundle holds
#   bin/fuzz_*        the four targets (debug info stripped; symbols kept for stack traces)
#   lib/              the non-system shared libraries they load (scripts/gpu-bundle.sh)
#   corpus/<target>/  the seed corpora (tests/fuzz/corpus) plus what local runs found
#                     (build-fuzz/corpus)
#   tokenizer.gguf    the default model's tokenizer metadata without its tensors, for
#                     fuzz_tokenizer (tests/fuzz/tokenizer_gguf.py)
#   run.sh            tests/fuzz/bundle_run.sh: runs every target for SECONDS, writes a summary
# and is written as OUT_DIR (default .fuzz-bundle/, git-ignored) and OUT_DIR.tar.gz.
#
#   scripts/fuzz-bundle.sh [OUT_DIR=.fuzz-bundle]
# There:  tar xzf OUT_DIR.tar.gz && OUT_DIR/run.sh SECONDS [JOBS]   (see run.sh)
# Environment: FLASHSERVE_FUZZ_BUILD (build dir, default build-fuzz), FLASHSERVE_FUZZ_JOBS
# (build jobs, default 2), FLASHSERVE_FUZZ_MODEL (the GGUF whose tokenizer is bundled; default
# the fetched SmolLM2 file).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${1:-.fuzz-bundle}"
build="${FLASHSERVE_FUZZ_BUILD:-build-fuzz}"
model="${FLASHSERVE_FUZZ_MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
targets=(gguf tokenizer chat_template request)

CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "${FLASHSERVE_FUZZ_JOBS:-2}" >/dev/null

rm -rf "$out"
mkdir -p "$out"
executables=()
for t in "${targets[@]}"; do executables+=("$build/fuzz_$t"); done
bash scripts/gpu-bundle.sh "$out" "${executables[@]}" >/dev/null
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t"
  cp tests/fuzz/corpus/"$t"/* "$out/corpus/$t/"
  if [ -d "$build/corpus/$t" ]; then cp -n "$build/corpus/$t"/* "$out/corpus/$t/" 2>/dev/null || true; fi
done
python3 tests/fuzz/tokenizer_gguf.py "$model" "$out/tokenizer.gguf" >/dev/null
cp tests/fuzz/bundle_run.sh "$out/run.sh"
chmod +x "$out/run.sh"

# The smoke test: every target loads its libraries from the bundle alone and runs its corpus.
for t in "${targets[@]}"; do
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$out/lib" FLASHSERVE_FUZZ_MODEL="$out/tokenizer.gguf" \
    "$out/bin/fuzz_$t" -runs=0 "$out/corpus/$t" >/dev/null 2>&1 ||
    { echo "fuzz-bundle: $out/bin/fuzz_$t does not run from the bundle" >&2; exit 1; }
done

parent="$(dirname "$out")"
name="$(basename "$out")"
tar czf "$out.tar.gz" -C "$parent" "$name"
echo "fuzz-bundle: $out ($(du -sh "$out" | cut -f1), $(ls "$out/lib" | wc -l) libraries," \
     "$(find "$out/corpus" -type f | wc -l) corpus files) and $out.tar.gz" \
     "($(du -h "$out.tar.gz" | cut -f1))"
