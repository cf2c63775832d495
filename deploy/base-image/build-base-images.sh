#!/usr/bin/env bash
# Builds the testbed's base images from Debian packages, with no image registry involved: a
# debootstrap (minbase) of this machine's Debian release, imported into Docker.
#   pagewire/jre:<release>         the Java 17 runtime, libibverbs, librdmacm, ibverbs-utils, rdmacm-utils, perftest, UCX and libfabric (the node image's runtime stage)
#   pagewire/build:<release>       a JDK 17, Maven, gcc and the verbs headers (the node image's build stage)
#   pagewire/prometheus:<release>  Debian's Prometheus (the testbed's own Prometheus image)
# Usage: build-base-images.sh [--rebuild] [jre|build|prometheus ...]  (default: all three; an image
# that already exists is kept unless --rebuild). About 70 s per image, the first time only.
# The Debian mirror is the one this machine's apt configuration uses.
set -euo pipefail

release=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
rebuild=""
if [ "${1:-}" = --rebuild ]; then rebuild=yes; shift; fi
[ $# -eq 0 ] && set -- jre build prometheus

say() { echo "build-base-images: $*" >&2; }

packages_of() {
  case "$1" in
    jre) echo openjdk-17-jre-headless,ca-certificates,libibverbs1,librdmacm1,libprotobuf-c1,ibverbs-utils,rdmacm-utils,perftest,libucx0,ucx-utils,libfabric-bin ;;
    build) echo openjdk-17-jdk-headless,maven,ca-certificates,gcc,make,libc6-dev,libibverbs-dev,librdmacm-dev,protobuf-c-compiler,libprotobuf-c-dev ;;
    prometheus) echo prometheus,ca-certificates ;;
    *) say "unknown image '$1' (jre, build or prometheus)"; exit 2 ;;
  esac
}

# The first mirror apt knows for this release's main component.
mirror=$(apt-cache policy | awk -v r="$release/main" '$3 == r && $2 ~ /^https?:/ { print $2; exit }')
if [ -z "$mirror" ]; then
  say "no Debian mirror for $release/main in this machine's apt configuration"
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
fi

cache=${PAGEWIRE_DEBOOTSTRAP_CACHE:-/var/cache/pagewire-debootstrap}
mkdir -p "$cache"
work=""
trap '[ -n "$work" ] && rm -rf "$work" "$work.log"' EXIT

for name in "$@"; do
  packages=$(packages_of "$name")
  image="pagewire/$name:$release"
  if [ -z "$rebuild" ] && docker image inspect "$image" >/dev/null 2>&1; then
    # Kept when it has every package the list names now (an image from before a package was added is rebuilt).
    if docker run --rm --entrypoint dpkg-query "$image" -W ${packages//,/ } >/dev/null 2>&1; then
      say "$image is there already"
      continue
    fi
    say "$image lacks some of $packages: rebuilding it"
  fi
  work=$(mktemp -d /tmp/pagewire-base.XXXXXX)
  say "debootstrap $release ($packages) from $mirror for $image"
  start=$SECONDS
  debootstrap --variant=minbase --cache-dir="$cache" --include="$packages" "$release" "$work" "$mirror" \
    >"$work.log" 2>&1 || { tail -n 30 "$work.log" >&2; say "debootstrap failed for $image"; exit 1; }
  # The image trusts what this machine trusts: certificate authorities added locally (a network that
  # inspects TLS has its own) go into the image's system bundle and Java trust store, so that Maven
  # in the build stage reaches the same repositories this machine does.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$work/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$work/usr/local/share/ca-certificates/"
    [ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$work/etc/ssl/certs/ca-certificates.crt"
    if [ -f /etc/ssl/certs/java/cacerts ] && [ -d "$work/etc/ssl/certs/java" ]; then
      cp /etc/ssl/certs/java/cacerts "$work/etc/ssl/certs/java/cacerts"
    fi
  fi
  rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/* "$work"/usr/share/doc/* \
    "$work"/usr/share/man/* "$work"/usr/share/info/*
  changes=(--change 'ENV LANG=C.UTF-8'
           --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
  if [ "$name" = prometheus ]; then
    # Data on /prometheus as the upstream image keeps it, owned by the unprivileged user it runs as.
    mkdir -p "$work/prometheus"
    chown 65534:65534 "$work/prometheus"
    changes+=(--change 'USER 65534:65534' --change 'WORKDIR /prometheus')
  fi
  tar -C "$work" -c . | docker import "${changes[@]}" - "$image" >/dev/null
  rm -rf "$work" "$work.log"
  work=""
  say "$image built in $((SECONDS - start)) s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{ printf "%d MB", $1 / 1e6 }'))"
done
