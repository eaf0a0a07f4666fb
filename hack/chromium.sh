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
"$(dirname "$0")/debian-package.sh" chromium "set CHROMIUM_BIN"
command -v chromium
