#!/usr/bin/env bash
# Builds Kueue's manager from the Go module proxy, once per machine and version, with Kueue's
# CRDs beside it, and prints the path of the binary. The tests of Baton's Kueue integration run
# it against a local control plane (test/kueuetest).
#
# The binary and a crd/ folder holding Kueue's CRDs (config/components/crd/bases of the same
# module version) are cached outside the repository, under $BATON_CACHE_DIR (default: the
# user's cache dir)/tools/kueue-<version>.
#
# Environment:
#   KUEUE_VERSION    the sigs.k8s.io/kueue module version (default v0.17.0: the newest the
#                    module proxy serves; it builds with the Go this repository needs)
#   BATON_CACHE_DIR  where the build is cached
#
# Progress goes to stderr; stdout is only the binary's path.
set -euo pipefail

KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}

cache_root=${BATON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton}
dir="$cache_root/tools/kueue-$KUEUE_VERSION"
bin="$dir/kueue"

log() { printf 'kueue.sh: %s\n' "$*" >&2; }

complete() {
  [ -x "$bin" ] && [ -f "$dir/crd/kueue.x-k8s.io_workloads.yaml" ]
}

if complete; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root/tools"
# Two targets may ask at once: one builds, the other waits for it.
exec 9>"$cache_root/tools/.kueue.lock"
flock 9
if complete; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "building Kueue $KUEUE_VERSION from the Go module proxy (once per machine; a few minutes)"

# go install pkg@version builds with the module's own go.mod, not this repository's.
GOBIN="$work" CGO_ENABLED=0 go install -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
  "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2

# The CRDs come from the same module version, as go install left it in the module cache (asked
# from outside any module, so that no go.mod or go.sum is touched).
src=$(cd "$work" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src/config/components/crd/bases" ]; then
  log "Kueue's CRDs are not in the module cache (looked in '$src')"
  exit 1
fi
mkdir -p "$work/crd"
cp "$src"/config/components/crd/bases/*.yaml "$work/crd/"
chmod u+w "$work"/crd/*.yaml

mkdir -p "$dir"
rm -rf "$dir/crd"
mv "$work/crd" "$dir/crd"
mv "$work/kueue" "$bin"
echo "$bin"
