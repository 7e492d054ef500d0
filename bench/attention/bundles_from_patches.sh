#!/usr/bin/env bash
# Bundles of kernel variants made from patches (a session's calls: results/sessionNN/*.patch):
# one scratch worktree with one build folder, then for each NAME[@REV][=PATCH[,PATCH...]] the
# tree set to REV (default HEAD), the patches applied in order and `make_bundle.sh OUT_DIR NAME`
# (NAME alone: REV as committed). The build folder is kept from one bundle to the next, so
# only what a patch or a REV changes is rebuilt. Run at the repository root; writes
# OUT_DIR/NAME.txz and NAME.commit. On 2 cores ~4 min for the first bundle, ~1 min a bundle after.
#
#   bench/attention/bundles_from_patches.sh OUT_DIR NAME[@REV][=PATCH[,PATCH...]]...
set -eu
[[ $# -ge 2 ]] || { echo "usage: $0 OUT_DIR NAME[@REV][=PATCH[,PATCH...]]..." >&2; exit 2; }
out=$(realpath -m "$1"); shift
mkdir -p "$out"
specs=()
for spec in "$@"; do  # the patches' absolute paths and the revisions' commits, before the worktree is entered
  head=${spec%%=*} patches=""
  name=${head%%@*} rev=HEAD
  [[ $head == *@* ]] && rev=${head#*@}
  rev=$(git rev-parse --verify "$rev^{commit}")
  if [[ $spec == *=* ]]; then
    IFS=, read -ra ps <<< "${spec#*=}"
    for p in "${ps[@]}"; do patches+="$(realpath "$p"),"; done
  fi
  specs+=("$name@$rev=$patches")
done
wt=$(mktemp -d /tmp/bundles.XXXX)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
for spec in "${specs[@]}"; do
  head=${spec%%=*}
  IFS=, read -ra ps <<< "${spec#*=}"
  (cd "$wt" && git checkout -q -- . && git clean -fdq -- kernels tests bench &&
    git checkout -q --detach "${head#*@}" &&
    for p in "${ps[@]}"; do git apply "$p"; done &&
    bench/attention/make_bundle.sh "$out" "${head%%@*}")
done
ls -la "$out"
