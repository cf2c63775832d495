#!/usr/bin/env bash
# Makes sure a Prometheus server is on this machine, installing Debian's package when it is missing
# (without letting it start a daemon of its own: the dashboards test runs its own Prometheus on
# loopback), and prints the path of the binary.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1; then
  "$(dirname "${BASH_SOURCE[0]}")/../debian-packages.sh" --no-daemons prometheus
fi
command -v prometheus
