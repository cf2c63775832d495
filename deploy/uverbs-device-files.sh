#!/usr/bin/env bash
# Makes /dev/infiniband/uverbs0..N-1 exist as character devices where no such file is there yet, so
# that software that looks for a device's file before it opens the device through libibverbs (UCX
# stats /dev/infiniband/<dev_name> and needs a character device it may read and write) finds
# Pagewire's devices. Nothing opens these files on Pagewire: the verbs library opens its devices
# through the node's socket. An existing file is left alone (a real device keeps working).
#   deploy/uverbs-device-files.sh [COUNT]          on a host: the numbers the kernel's ib_uverbs gives
#                                                  (major 231, minor 192 + i); with no ib_uverbs driver
#                                                  loaded, opening one fails with ENXIO
#   deploy/uverbs-device-files.sh --null [COUNT]   in a container or pod: /dev/null's numbers (1:3).
#                                                  A container's device cgroup refuses even access() to
#                                                  a device it was not granted, and granting 231:192+
#                                                  would hand the container a real HCA where the host
#                                                  has one; opening these opens a null device
# COUNT defaults to 4: pagewire0..3 are uverbs0..3.
set -euo pipefail
major=231 minor=192 step=1
if [ "${1:-}" = --null ]; then major=1 minor=3 step=0; shift; fi
count=${1:-4}
dir=/dev/infiniband
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    missing=""
    for i in $(seq 0 $((count - 1))); do [ -e "$dir/uverbs$i" ] || missing="$missing $dir/uverbs$i"; done
    [ -z "$missing" ] && exit 0
    echo "uverbs-device-files:$missing missing and this user cannot create device files; as root:" >&2
    echo "  mkdir -p $dir && for i in \$(seq 0 $((count - 1))); do mknod -m 666 $dir/uverbs\$i c $major \$(($minor + i * $step)); done" >&2
    exit 1
  fi
fi
$sudo mkdir -p "$dir"
for i in $(seq 0 $((count - 1))); do
  f="$dir/uverbs$i"
  if [ ! -e "$f" ]; then
    $sudo mknod -m 666 "$f" c "$major" $((minor + i * step))
  fi
done
