#!/usr/bin/env bash
# Installs one of Debian's packages for the test harness, as a fresh CI machine needs:
#   hack/debian-package.sh PACKAGE "what else the user can do"
# It runs apt-get when it runs as root on a machine that has it, and otherwise fails, saying
# what to install. Progress goes to stderr.
set -euo pipefail

package=$1 otherwise=${2:-}
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  printf '%s: not installed, and it cannot be installed here: install Debian'"'"'s %s package%s\n' \
    "$package" "$package" "${otherwise:+, or $otherwise}" >&2
  exit 1
fi
printf '%s: installing Debian'"'"'s %s package\n' "$package" "$package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "$package" >&2
