#!/usr/bin/env bash
# Copies into the Helm chart (charts/baton) the files that are generated or written once under
# config/, so that the chart installs exactly what config/default does:
#   config/crd/bases/*.yaml       -> charts/baton/crds/            (the CRDs, as Helm installs them)
#   config/rbac/role.yaml         -> charts/baton/files/manager-role.yaml   (the manager's rules)
#   config/rbac/webhook_role.yaml -> charts/baton/files/webhook-role.yaml   (the webhook replicas')
#   config/webhook/manifests.yaml -> charts/baton/files/webhook-manifests.yaml (the webhook)
#   config/prometheus/rules.yaml  -> charts/baton/files/rules.yaml (the PrometheusRule's groups)
# The copies are byte-identical; stale ones (a CRD no longer generated) are removed. Run it after
# controller-gen; a stale chart then shows up in git status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
chart="$root/charts/baton"

mkdir -p "$chart/crds" "$chart/files"
find "$chart/crds" -maxdepth 1 -name '*.yaml' -type f -delete
cp "$root"/config/crd/bases/*.yaml "$chart/crds/"
cp "$root/config/rbac/role.yaml" "$chart/files/manager-role.yaml"
cp "$root/config/rbac/webhook_role.yaml" "$chart/files/webhook-role.yaml"
cp "$root/config/webhook/manifests.yaml" "$chart/files/webhook-manifests.yaml"
cp "$root/config/prometheus/rules.yaml" "$chart/files/rules.yaml"
