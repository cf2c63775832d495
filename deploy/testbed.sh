#!/usr/bin/env bash
# Runs the docker-compose testbed on a machine without an image registry: makes sure a Docker engine
# runs (deploy/docker/engine.sh: Debian's docker.io, dockerd started here when none runs), builds the
# base images from Debian packages when absent, builds the node image from this checkout, then hands
# over to compose with the local images named (PAGEWIRE_*_IMAGE).
#   deploy/testbed.sh up [ARGS]       # start in the background (up -d), once every node is healthy
#   deploy/testbed.sh down [-v]       # stop and remove (-v: also the swap and Prometheus volumes)
#   deploy/testbed.sh certs DIR       # copy the CA, the "app" certificate and the metrics token out, for the host
#   deploy/testbed.sh bench [ARGS]    # up, then `pagewire bench` with node-1 and node-2 as its testbed (ARGS: bench's)
#   deploy/testbed.sh ps | logs -f | ... any other compose command, as is (no rebuild)
#   deploy/testbed.sh stop-engine     # stop the dockerd this script started (not one that was running)
# Host ports are variables: PAGEWIRE_HOST_PORT_NODE1=17101 deploy/testbed.sh up (see docker-compose.yml).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "${1:-}" = stop-engine ]; then
  exec "$root/deploy/docker/engine.sh" stop
fi

"$root/deploy/docker/engine.sh" ensure

release=$(. /etc/os-release && echo "$VERSION_CODENAME")
export PAGEWIRE_NODE_IMAGE=${PAGEWIRE_NODE_IMAGE:-pagewire/node:latest}
export PAGEWIRE_BUILD_IMAGE=${PAGEWIRE_BUILD_IMAGE:-pagewire/build:$release}
export PAGEWIRE_RUNTIME_IMAGE=${PAGEWIRE_RUNTIME_IMAGE:-pagewire/jre:$release}
export PAGEWIRE_PROMETHEUS_IMAGE=${PAGEWIRE_PROMETHEUS_IMAGE:-pagewire/prometheus:$release}

if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  compose=(docker-compose)
fi
if [ $# -eq 0 ]; then
  set -- up
fi
if [ "$1" = up ]; then
  shift
  # The Prometheus image; build-node-image.sh sees to the two the node image is built on.
  "$root/deploy/base-image/build-base-images.sh" prometheus
  "$root/deploy/docker/build-node-image.sh" "$PAGEWIRE_NODE_IMAGE"
  # The nodes' ring directory, shared with applications on the host (docker-compose.yml): the nodes'
  # user (7100) makes their files there, owner-only, as in /tmp.
  rings=${PAGEWIRE_TESTBED_RINGS:-/dev/shm/pagewire-testbed}
  mkdir -p "$rings" && chmod 1777 "$rings"
  # Detached unless the caller says otherwise; compose waits for healthy nodes before Prometheus.
  detach=(-d)
  for arg in "$@"; do
    case "$arg" in -d|--detach|--abort-on-container-exit|--exit-code-from*) detach=() ;; esac
  done
  "${compose[@]}" up "${detach[@]}" --no-build "$@"
  echo "testbed: nodes at localhost:${PAGEWIRE_HOST_PORT_NODE1:-7101}..${PAGEWIRE_HOST_PORT_NODE3:-7103}," \
    "Prometheus at localhost:${PAGEWIRE_HOST_PORT_PROMETHEUS:-9090}; stop with: deploy/testbed.sh down" >&2
  exit 0
fi
if [ "$1" = certs ]; then
  out=${2:?usage: deploy/testbed.sh certs DIR}
  mkdir -p "$out"
  container=$("${compose[@]}" ps -q node-1)
  for file in ca.pem app.pem app.key metrics.token; do
    docker cp "$container:/var/lib/pagewire/certs/$file" "$out/$file"
  done
  chmod 600 "$out/app.key" "$out/metrics.token"
  echo "testbed: CA, application certificate and metrics token in $out (pagewire stat --certs $out localhost:${PAGEWIRE_HOST_PORT_NODE1:-7101};" \
    "curl -H \"Authorization: Bearer \$(cat $out/metrics.token)\" localhost:${PAGEWIRE_HOST_PORT_NODE1_METRICS:-9101}/metrics)" >&2
  exit 0
fi
if [ "$1" = bench ]; then
  shift
  "$0" up
  certs=$(mktemp -d /tmp/pagewire-testbed-certs.XXXXXX)
  trap 'rm -rf "$certs"' EXIT
  "$0" certs "$certs"
  # The host processes the testbed is compared with get the compose nodes' own settings; verbs programs
  # run inside node-1's and node-2's containers, as a user of the testbed runs them.
  containers="$("${compose[@]}" ps -q node-1),$("${compose[@]}" ps -q node-2)"
  "$root/pagewire" bench --testbed "localhost:${PAGEWIRE_HOST_PORT_NODE1:-7101},localhost:${PAGEWIRE_HOST_PORT_NODE2:-7102}" --certs "$certs" \
    --testbed-containers "$containers" \
    --set pagewire.kernel.physicalMemoryBytes=256MiB --set pagewire.kernel.swapBytes=1GiB \
    --set pagewire.kernel.memlockLimitBytes=64MiB --set pagewire.nic.tlbEntries=1024 "$@"
  exit 0
fi
exec "${compose[@]}" "$@"
