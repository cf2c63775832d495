#!/usr/bin/env bash
# Runs the docker-compose testbed, building whatever is missing first: a Docker engine (Debian's
# docker.io, started here if none runs), the base image (from Debian packages, no registry), the
# pagewire jar, and the node image. Then `docker compose <args>` (default: up -d).
#   deploy/testbed.sh up      # start;  deploy/testbed.sh down   # stop;  deploy/testbed.sh logs -f
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! docker info >/dev/null 2>&1; then
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "testbed: installing Debian's docker.io" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose >&2
  fi
  if ! docker info >/dev/null 2>&1; then
    echo "testbed: starting dockerd (log: /tmp/pagewire-dockerd.log)" >&2
    nohup dockerd >/tmp/pagewire-dockerd.log 2>&1 &
    echo $! >/tmp/pagewire-dockerd.pid
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "testbed: dockerd did not start; see /tmp/pagewire-dockerd.log" >&2; exit 1; }
  fi
fi

release=$(. /etc/os-release && echo "$VERSION_CODENAME")
if ! docker image inspect "pagewire/base:$release" >/dev/null 2>&1; then
  "$root/deploy/base-image/build-base-image.sh" "pagewire/base:$release" >/dev/null
fi
"$root/pagewire" --version >/dev/null

if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  compose=(docker-compose)
fi
if [ $# -eq 0 ]; then
  set -- up -d
fi
if [ "$1" = up ]; then
  "${compose[@]}" build >&2
fi
exec "${compose[@]}" "$@"
