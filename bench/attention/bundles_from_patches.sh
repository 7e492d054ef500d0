#!/usr/bin/env bash
# Bundles of kernel variants made from patches (a session's calls: results/sessionNN/*.patch):
# a scratch worktree of HEAD, then for each NAME=PATCH[,PATCH...] the tree reset to HEAD, the
# patches applied in order and `make_bundle.sh OUT_DIR NAME` (NAME alone: HEAD as committed).
# Run at the repository root; writes OUT_DIR/NAME.txz and NAME.commit. A few minutes a bundle.
#
#   bench/attention/bundles_from_patches.sh OUT_DIR NAME[=PATCH[,PATCH...]]...
set -eu
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR NAME[=PATCH[,PATCH...]]..." >&2; exit 2; }
out=$(realpath -m "$1"); shift
mkdir -p "$out"
specs=()
for spec in "$@"; do  # the patches' absolute paths, before the worktree is entered
  name=${spec%%=*} patches=""
  if [[ $spec == *=* ]]; then
    IFS=, read -ra ps <<< "${spec#*=}"
    for p in "${ps[@]}"; do patches+="$(realpath "$p"),"; done
  fi
  specs+=("$name=$patches")
done
wt=$(mktemp -d /tmp/bundles.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
for spec in "${specs[@]}"; do
  name=${spec%%=*}
  IFS=, read -ra ps <<< "${spec#*=}"
  (cd "$wt" && git checkout -q -- . && git clean -fdq -- kernels tests bench &&
    for p in "${ps[@]}"; do git apply "$p"; done &&
    bench/attention/make_bundle.sh "$out" "$name")
done
ls -la "$out"
