#!/usr/bin/env bash
# Builds the base image of the testbed from Debian packages, with no image registry involved:
# debootstrap (minbase) of this machine's Debian release with the Java runtime and Prometheus,
# imported into Docker as pagewire/base:<release>. Takes about a minute and a half.
#
# The Debian mirror is the one this machine's apt configuration uses.
set -euo pipefail

release=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
image=${1:-pagewire/base:$release}

# The first mirror apt knows for this release's main component.
mirror=$(apt-cache policy | awk -v r="$release/main" '$3 == r && $2 ~ /^https?:/ { print $2; exit }')
if [ -z "$mirror" ]; then
  echo "build-base-image: no Debian mirror for $release/main in this machine's apt configuration" >&2
  exit 1
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
fi

root=$(mktemp -d /tmp/pagewire-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "build-base-image: debootstrap $release from $mirror into $root" >&2
debootstrap --variant=minbase --include=openjdk-17-jre-headless,prometheus,ca-certificates "$release" "$root" "$mirror" >&2
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  - "$image" >&2
echo "$image"
