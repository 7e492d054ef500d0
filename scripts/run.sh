#!/usr/bin/env bash
# The README's run command: installs dependencies, fetches the default model, builds, and
# starts the server on it (GPU when present, CPU otherwise). Extra arguments go to the server.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${FLASHSERVE_BUILD_DIR:-build}"

bash scripts/install-deps.sh
bash scripts/fetch-model.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA="${FLASHSERVE_CUDA:-AUTO}"
cmake --build "$build" -j "$(nproc)" --target flashserve flashserve-cli
exec "$build/bin/flashserve" --model models/SmolLM2-135M-Instruct.Q4_1.gguf --device auto "$@"
