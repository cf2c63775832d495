#!/usr/bin/env bash
# Installs the Debian packages named that are not installed yet, from the machine's own apt sources
# (root, or sudo without a password; three attempts). With --no-daemons, a package's service is kept
# from starting (Debian's policy-rc.d mechanism), as the tests run their own.
#   deploy/debian-packages.sh [--no-daemons] PACKAGE...
set -euo pipefail

no_daemons=""
if [ "${1:-}" = --no-daemons ]; then no_daemons=yes; shift; fi
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "debian-packages: ${missing[*]} missing and this user cannot install packages; run as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

policy=/usr/sbin/policy-rc.d
made_policy=""
if [ -n "$no_daemons" ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  made_policy=yes
fi
cleanup() {
  if [ -n "$made_policy" ]; then
    $sudo rm -f "$policy"
  fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
  if $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
    exit 0
  fi
  if [ "$attempt" = 3 ]; then
    echo "debian-packages: apt-get could not install ${missing[*]} (see above)" >&2
    exit 1
  fi
  sleep $((attempt * 5))
done
