#!/usr/bin/env bash
# Makes sure the Debian packages the verbs library builds and is tested with are on this machine:
# libibverbs-dev (the verbs headers and the real libibverbs), protobuf-c (the node's messages in C),
# ibverbs-utils, rdma-core's examples, perftest, UCX with its examples' sources, OpenMPI and libfabric's tools
# (the programs the tests run on Pagewire), and valgrind (memcheck over a verbs program, CheckedVerbsLibraryTest); then
# the device files UCX looks for before it opens a device (deploy/uverbs-device-files.sh).
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
"$here/../deploy/debian-packages.sh" libibverbs-dev librdmacm-dev protobuf-c-compiler libprotobuf-c-dev ibverbs-utils rdmacm-utils \
  perftest valgrind ucx-utils libucx0 libucx-dev openmpi-bin libopenmpi-dev libfabric-bin
exec "$here/../deploy/uverbs-device-files.sh"
