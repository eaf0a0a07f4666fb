#!/usr/bin/env bash
# Makes kube-apiserver and etcd binaries available for envtest, the e2e suite and the
# quickstart, and prints the directory to use as KUBEBUILDER_ASSETS.
#
# Order of preference:
#   1. a cached copy under $BATON_CACHE_DIR (default: the user's cache dir)/envtest/<version>;
#   2. setup-envtest, which downloads the release binaries (needs internet);
#   3. a build from the Go module proxy: k8s.io/kubernetes cmd/kube-apiserver with its staging
#      modules pinned by replace directives, and etcd from go.etcd.io/etcd/server/v3/etcdmain.
#      This works offline as long as the module proxy is reachable; it takes several minutes
#      once per machine and version.
#
# Environment:
#   ENVTEST_K8S_VERSION   Kubernetes version (default 1.37.1)
#   ENVTEST_ETCD_VERSION  etcd version for the build fallback (default 3.7.3)
#   ENVTEST_SOURCE        auto (default) | download | build
#   BATON_CACHE_DIR       where binaries are cached
#
# Progress goes to stderr; stdout is only the directory.
set -euo pipefail

K8S_VERSION=${ENVTEST_K8S_VERSION:-1.37.1}
ETCD_VERSION=${ENVTEST_ETCD_VERSION:-3.7.3}
SOURCE=${ENVTEST_SOURCE:-auto}
SETUP_ENVTEST_VERSION=${SETUP_ENVTEST_VERSION:-v0.25.1}
GOOS=$(go env GOOS)
GOARCH=$(go env GOARCH)

cache_root=${BATON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton}
dir="$cache_root/envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-${GOOS}-${GOARCH}"

log() { printf 'envtest-assets: %s\n' "$*" >&2; }

complete() {
  [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]
}

if complete "$dir"; then
  echo "$dir"
  exit 0
fi

try_download() {
  log "trying setup-envtest ${SETUP_ENVTEST_VERSION} for Kubernetes ${K8S_VERSION}"
  local bindir="$cache_root/setup-envtest" out
  mkdir -p "$bindir"
  if ! GOBIN="$bindir" go install "sigs.k8s.io/controller-runtime/tools/setup-envtest@${SETUP_ENVTEST_VERSION}" >&2; then
    return 1
  fi
  # Downloads hang rather than fail on some closed networks: bound them.
  if ! out=$(timeout 120 "$bindir/setup-envtest" use "$K8S_VERSION" -p path --bin-dir "$cache_root/setup-envtest/k8s" 2>/dev/null); then
    return 1
  fi
  complete "$out" || return 1
  mkdir -p "$dir"
  cp "$out/kube-apiserver" "$out/etcd" "$dir/"
  [ -x "$out/kubectl" ] && cp "$out/kubectl" "$dir/"
  return 0
}

build() {
  log "building kube-apiserver v${K8S_VERSION} and etcd v${ETCD_VERSION} from the Go module proxy (once per machine; several minutes)"
  local work minor major staging_version
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  major=${K8S_VERSION%%.*}
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  staging_version="v0.${K8S_VERSION#*.}"

  # kube-apiserver: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them
  # with local paths; a module that depends on it must pin them to their published versions.
  mkdir -p "$work/apiserver"
  (
    cd "$work/apiserver"
    go mod init baton.local/envtest-apiserver >/dev/null 2>&1
    go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" >k8s.json
    if grep -q '"Error"' k8s.json; then
      log "the module proxy cannot serve k8s.io/kubernetes@v${K8S_VERSION}:"
      grep '"Error"' k8s.json >&2
      exit 1
    fi
    gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' k8s.json)
    {
      echo "require k8s.io/kubernetes v${K8S_VERSION}"
      echo "replace ("
      grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >>go.mod
    cat >tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
    go mod tidy >&2
    ldflags="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $p.gitVersion=v${K8S_VERSION} -X $p.gitMajor=${major} -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
    done
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
  )

  mkdir -p "$work/etcd"
  (
    cd "$work/etcd"
    go mod init baton.local/envtest-etcd >/dev/null 2>&1
    cat >main.go <<'GO'
// Command etcd is etcd's own entry point, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
    go mod tidy >&2
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" . >&2
  )

  mkdir -p "$dir"
  mv "$work/out/kube-apiserver" "$work/out/etcd" "$dir/"
}

mkdir -p "$cache_root"
# Two test targets may ask at once: one builds, the other waits for it.
exec 9>"$cache_root/.envtest.lock"
flock 9
if complete "$dir"; then
  echo "$dir"
  exit 0
fi
case "$SOURCE" in
  download) try_download || { log "setup-envtest could not download Kubernetes ${K8S_VERSION}"; exit 1; } ;;
  build) build ;;
  auto) try_download || { log "download unavailable; falling back to a build"; build; } ;;
  *) log "ENVTEST_SOURCE must be auto, download or build, not ${SOURCE}"; exit 2 ;;
esac

complete "$dir" || { log "binaries missing in $dir"; exit 1; }
echo "$dir"
