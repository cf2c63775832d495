/*
 * Every header that declares a function the library exports: rdma-core 44's public ones, libc's for the
 * calls the library puts in front of libc's, and src/rdma_private.h for the exports whose rdma-core headers
 * Debian does not install. test/abi_check.sh checks each export against these declarations.
 */
#include <ifaddrs.h>
#include <signal.h>
#include <sys/mman.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "rdma_private.h"
