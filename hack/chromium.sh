#!/usr/bin/env bash
# Makes a headless-capable Chromium available for the console's browser tests, and prints its
# path (CHROMIUM_BIN). The tests start it themselves, headless, with no sandbox and no
# background networking; nothing is left running.
#
# Order of preference: $CHROMIUM_BIN; chromium on the PATH; Debian's chromium package,
# installed with apt-get when this runs as root (a fresh CI machine).
#
# Progress goes to stderr; stdout is only the path.
set -euo pipefail

log() { printf 'chromium: %s\n' "$*" >&2; }

if [ -n "${CHROMIUM_BIN:-}" ] && [ -x "$CHROMIUM_BIN" ]; then
  echo "$CHROMIUM_BIN"
  exit 0
fi
for name in chromium chromium-browser google-chrome; do
  if path=$(command -v "$name" 2>/dev/null); then
    echo "$path"
    exit 0
  fi
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  log "Chromium is not installed and cannot be installed here: install Debian's chromium package, or set CHROMIUM_BIN"
  exit 1
fi
log "installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
command -v chromium
