#!/usr/bin/env bash
# Makes sure a Prometheus server is on this machine, installing Debian's package when it is missing,
# and prints the path of the binary. The dashboards test runs its own Prometheus on loopback; the
# package is kept from starting a daemon of its own (Debian's policy-rc.d mechanism). Packages come
# from the machine's own apt sources.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1; then
  command -v prometheus
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "ensure-prometheus: prometheus is not installed and this user cannot install packages; run as root:" >&2
    echo "  apt-get install -y prometheus" >&2
    exit 1
  fi
fi

policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ]; then
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
  if $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq --no-install-recommends prometheus >&2; then
    break
  fi
  if [ "$attempt" = 3 ]; then
    echo "ensure-prometheus: apt-get could not install prometheus (see above)" >&2
    exit 1
  fi
  sleep $((attempt * 5))
done

command -v prometheus
