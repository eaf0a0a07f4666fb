#!/usr/bin/env bash
# Prints a directory holding the Prometheus Operator's CustomResourceDefinitions (ServiceMonitor,
# PrometheusRule and the others), taken from its Go module through the module proxy (no other
# download needed). The chart's optional ServiceMonitor and PrometheusRule need them for a
# server-side dry run.
set -euo pipefail
VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod init baton.local/prometheus-operator-crds >/dev/null 2>&1
dir=$(go mod download -json "github.com/prometheus-operator/prometheus-operator@${VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
crds="$dir/example/prometheus-operator-crd"
[ -f "$crds/monitoring.coreos.com_servicemonitors.yaml" ] && [ -f "$crds/monitoring.coreos.com_prometheusrules.yaml" ] ||
  { echo "prometheus-operator ${VERSION} has no example/prometheus-operator-crd" >&2; exit 1; }
echo "$crds"
