#!/usr/bin/env bash
# Builds the node image from this checkout with the Dockerfile's own Maven stage, on the base images
# that deploy/base-image/build-base-images.sh makes from Debian packages (no registry needed).
#   deploy/docker/build-node-image.sh [TAG]     # default pagewire/node:latest
# With a registry at hand, plain `docker build .` (public base images) does the same.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tag=${1:-pagewire/node:latest}
release=$(. /etc/os-release && echo "$VERSION_CODENAME")
"$root/deploy/base-image/build-base-images.sh" jre build
echo "build-node-image: building $tag from $root" >&2
start=$SECONDS
# The classic builder (what Testcontainers and docker-compose 1.29 use too); its output goes to a log
# that is shown only when the build fails.
log=$(mktemp /tmp/pagewire-node-image.XXXXXX.log)
if ! DOCKER_BUILDKIT=0 docker build --build-arg "BUILD_IMAGE=pagewire/build:$release" --build-arg "RUNTIME_IMAGE=pagewire/jre:$release" \
    -t "$tag" "$root" >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "build-node-image: docker build failed (whole log: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "build-node-image: $tag built in $((SECONDS - start)) s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{ printf "%d MB", $1 / 1e6 }'))" >&2
