#!/usr/bin/env bash
# Builds a tool the tests use from the Go module proxy, once per machine and version, and prints
# the path of its binary. The binaries are cached outside the repository, under
# $BATON_CACHE_DIR (default: the user's cache dir)/tools/<tool>-<version>.
#
# Usage: hack/tool.sh helm|promtool|otelcol|golangci-lint
#
#   helm           Helm, for the chart's lint and template checks.
#   promtool       Prometheus' rule checker, for config/prometheus.
#   otelcol        An OpenTelemetry Collector with the OTLP receiver and the file exporter, made
#                  with the collector's own builder: the traces' real receiver in the tests.
#   golangci-lint  golangci-lint with kube-api-linter built in as a module plugin, as
#                  `golangci-lint custom` would make it (that command clones from GitHub, which
#                  this build does not need).
#
# Progress goes to stderr; stdout is only the binary's path.
set -euo pipefail

HELM_VERSION=${HELM_VERSION:-v4.3.1}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0} # Prometheus 3.16's module version
OTELCOL_VERSION=${OTELCOL_VERSION:-v0.165.0}
GOLANGCI_LINT_VERSION=${GOLANGCI_LINT_VERSION:-v2.15.0}
KUBE_API_LINTER_VERSION=${KUBE_API_LINTER_VERSION:-v0.0.0-20260716143926-092fe0c72997}

tool=${1:-}
cache_root=${BATON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton}

log() { printf 'tool.sh: %s\n' "$*" >&2; }

case "$tool" in
  helm) version=$HELM_VERSION ;;
  promtool) version=$PROMETHEUS_VERSION ;;
  otelcol) version=$OTELCOL_VERSION ;;
  golangci-lint) version="$GOLANGCI_LINT_VERSION-kal-${KUBE_API_LINTER_VERSION##*-}" ;;
  *) echo "usage: hack/tool.sh helm|promtool|otelcol|golangci-lint" >&2; exit 2 ;;
esac
dir="$cache_root/tools/$tool-$version"
bin="$dir/$tool"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache_root/tools"
# Two targets may ask at once: one builds, the other waits for it.
exec 9>"$cache_root/tools/.$tool.lock"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "building $tool $version from the Go module proxy (once per machine; a few minutes)"

case "$tool" in
  helm)
    GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
    ;;
  promtool)
    GOBIN="$work" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
      "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
    ;;
  otelcol)
    # The builder writes the collector's sources; the module is put together here, because the
    # builder's own `go mod tidy` also wants the components' test dependencies, and the module
    # proxy refuses one of those (otlpencodingextension). `tidy -e` goes on past it.
    GOBIN="$work" go install "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION" >&2
    cat >"$work/builder.yaml" <<YAML
dist:
  name: otelcol
  description: OpenTelemetry Collector with the OTLP receiver and the file exporter
  output_path: $work/dist
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $OTELCOL_VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter $OTELCOL_VERSION
YAML
    "$work/builder" --config "$work/builder.yaml" --skip-get-modules --skip-compilation >&2
    (
      cd "$work/dist"
      go mod init baton.local/otelcol >/dev/null 2>&1
      go get "go.opentelemetry.io/collector/receiver/otlpreceiver@$OTELCOL_VERSION" \
        "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter@$OTELCOL_VERSION" >&2
      go mod tidy -e >&2 2>&1 | grep -v otlpencodingextension >&2 || true
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/otelcol" . >&2
    )
    ;;
  golangci-lint)
    mkdir -p "$work/src"
    (
      cd "$work/src"
      go mod init baton.local/golangci-lint >/dev/null 2>&1
      cat >main.go <<'GO'
// Command golangci-lint is golangci-lint with kube-api-linter registered as a module plugin.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	_ "sigs.k8s.io/kube-api-linter" // registers the kubeapilinter module plugin
)

func main() {
	info := commands.BuildInfo{Version: "custom", Commit: "?", Date: "(unknown)", GoVersion: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/golangci/golangci-lint/v2" {
				info.Version = dep.Version[1:] + "-custom"
			}
		}
	}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}
GO
      go get "github.com/golangci/golangci-lint/v2@$GOLANGCI_LINT_VERSION" "sigs.k8s.io/kube-api-linter@$KUBE_API_LINTER_VERSION" >&2
      go mod tidy >&2
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/golangci-lint" . >&2
    )
    ;;
esac

mkdir -p "$dir"
mv "$work/$tool" "$bin"
echo "$bin"
