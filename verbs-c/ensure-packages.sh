#!/usr/bin/env bash
# Makes sure the Debian packages the verbs library builds and is tested with are on this machine,
# installing what is missing from the machine's own apt sources: libibverbs-dev (the verbs headers
# and the real libibverbs), protobuf-c (the node's messages in C), ibverbs-utils, rdma-core's
# examples and perftest (the programs the tests run on Pagewire).
set -euo pipefail

packages=(libibverbs-dev protobuf-c-compiler libprotobuf-c-dev ibverbs-utils perftest)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo -n"
  else
    echo "ensure-packages: ${missing[*]} missing and this user cannot install packages; run as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
  if $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
    exit 0
  fi
  if [ "$attempt" = 3 ]; then
    echo "ensure-packages: apt-get could not install ${missing[*]} (see above)" >&2
    exit 1
  fi
  sleep $((attempt * 5))
done
