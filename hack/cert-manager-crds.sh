#!/usr/bin/env bash
# Prints a directory holding cert-manager's CustomResourceDefinitions, taken from its Go module
# through the module proxy (no other download needed). config/default uses cert-manager's
# Certificate and Issuer; a server-side dry run of it needs these CRDs in the cluster.
set -euo pipefail
VERSION=${CERT_MANAGER_VERSION:-v1.21.2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod init baton.local/cert-manager-crds >/dev/null 2>&1
dir=$(go mod download -json "github.com/cert-manager/cert-manager@${VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
[ -d "$dir/deploy/crds" ] || { echo "cert-manager ${VERSION} has no deploy/crds" >&2; exit 1; }
echo "$dir/deploy/crds"
