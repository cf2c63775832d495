#!/usr/bin/env bash
# What the container tier of the system tests needs before it runs (Maven's pre-integration-test):
# a Docker engine (started here when none runs; deploy/docker/engine.sh), the base images, and the
# node image built from this checkout under the tag the tests run.
#   deploy/docker/prepare-system-tests.sh [TAG]     # default pagewire/node:system-tests
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tag=${1:-pagewire/node:system-tests}
"$root/deploy/docker/engine.sh" ensure
# The Prometheus image; build-node-image.sh sees to the two the node image is built on.
"$root/deploy/base-image/build-base-images.sh" prometheus
"$root/deploy/docker/build-node-image.sh" "$tag"
