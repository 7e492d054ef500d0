#!/usr/bin/env bash
# Fetches the tokenizer and chat-template test data that llama.cpp ships and that the
# tokenizer_test / chat_template_test suites read: the vocabulary-only GGUFs
# models/ggml-vocab-*.gguf with their .inp/.out tokenizer test pairs, and the chat templates
# models/templates/*.jinja. They come from the PyPI sdist of llama-cpp-python 0.3.36 (which
# vendors llama.cpp), checked by sha256; nothing is built. Not committed (about 45 MB):
# they go to the git-ignored build/test-data/vocab, where the tests of every build dir (build,
# build-asan, ...) look. Reuses the folder when its stamp names the same sdist hash.
#
#   scripts/fetch-test-vocab.sh [DEST_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/build/test-data/vocab}"
version="0.3.36"
sdist="llama_cpp_python-$version.tar.gz"
sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# The vocabularies the tests use (each with .inp/.out where llama.cpp has them).
vocabs=(llama-bpe llama-spm qwen2 qwen35 phi-3 gemma-4 gpt-2 starcoder refact mpt)

stamp="$dest/SOURCE"
if [ -f "$stamp" ] && grep -qx "$sdist sha256=$sha256" "$stamp"; then
  echo "fetch-test-vocab: $dest present ($sdist)"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# --no-binary: the sdist (the wheel has no models/); pip only prepares its metadata (it installs
# the build backend in a temporary environment), nothing is compiled.
python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
  -d "$tmp" "llama-cpp-python==$version"
if ! echo "$sha256  $tmp/$sdist" | sha256sum --check --status; then
  echo "fetch-test-vocab: sha256 mismatch for $sdist (expected $sha256, got" \
    "$(sha256sum "$tmp/$sdist" | cut -d' ' -f1))" >&2
  exit 1
fi
prefix="llama_cpp_python-$version/vendor/llama.cpp/models"
listing="$(tar -tzf "$tmp/$sdist")"
members=("$prefix/templates")
for v in "${vocabs[@]}"; do
  for f in "ggml-vocab-$v.gguf" "ggml-vocab-$v.gguf.inp" "ggml-vocab-$v.gguf.out"; do
    if grep -qxF "$prefix/$f" <<<"$listing"; then members+=("$prefix/$f"); fi
  done
  if ! grep -qxF "$prefix/ggml-vocab-$v.gguf" <<<"$listing"; then
    echo "fetch-test-vocab: $sdist has no ggml-vocab-$v.gguf" >&2
    exit 1
  fi
done
tar -xzf "$tmp/$sdist" -C "$tmp" "${members[@]}"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$tmp/$prefix" "$dest"
echo "$sdist sha256=$sha256" > "$stamp"
echo "fetch-test-vocab: $dest ($(ls "$dest" | wc -l) entries, $(ls "$dest/templates" | wc -l) templates)"
