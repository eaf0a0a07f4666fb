#!/usr/bin/env bash
# Makes PostgreSQL's server programs available for the transcript store's tests, and prints the
# directory that holds them (PG_BIN). The tests start a throwaway server of their own on
# loopback (test/pgtest); nothing is left running.
#
# Order of preference: $PG_BIN; the newest /usr/lib/postgresql/<version>/bin; Debian's
# postgresql package, installed with apt-get when this runs as root (a fresh CI machine).
#
# Progress goes to stderr; stdout is only the directory.
set -euo pipefail

newest() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n | tail -n 1
}

if [ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ]; then
  echo "$PG_BIN"
  exit 0
fi
dir=$(newest)
if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
  # The package's own cluster is not used; the tests start servers of their own.
  "$(dirname "$0")/debian-package.sh" postgresql "set PG_BIN or BATON_TEST_POSTGRES_DSN"
  dir=$(newest)
fi
echo "$dir"
