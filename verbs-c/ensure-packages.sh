#!/usr/bin/env bash
# Makes sure the Debian packages the verbs library builds and is tested with are on this machine:
# libibverbs-dev (the verbs headers and the real libibverbs), protobuf-c (the node's messages in C),
# ibverbs-utils, rdma-core's examples and perftest (the programs the tests run on Pagewire), and valgrind
# (memcheck over a verbs program, CheckedVerbsLibraryTest).
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../deploy/debian-packages.sh" libibverbs-dev librdmacm-dev protobuf-c-compiler libprotobuf-c-dev ibverbs-utils rdmacm-utils perftest valgrind
