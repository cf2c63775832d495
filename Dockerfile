# A Pagewire node, built from the sources in this directory: `docker build -t pagewire/node .`
# needs nothing but Docker and a registry holding the two base images below. Without a registry,
# deploy/base-image/build-base-images.sh builds both from Debian packages, and
#   docker build --build-arg BUILD_IMAGE=pagewire/build:bookworm --build-arg RUNTIME_IMAGE=pagewire/jre:bookworm -t pagewire/node .
# uses them (deploy/testbed.sh does all of that for you). The file works with BuildKit and with the
# classic builder (Debian's docker-compose 1.29 and Testcontainers use the classic one).
# Settings come from PAGEWIRE_* variables (see `pagewire node --list-settings`).
ARG BUILD_IMAGE=maven:3.9-eclipse-temurin-17
ARG RUNTIME_IMAGE=eclipse-temurin:17-jre

# The poms (and the .proto files) alone, so that the dependency layer below is rebuilt only when one
# of them changes, not on every change to a source file.
FROM ${BUILD_IMAGE} AS poms
COPY . /src
RUN find /src -type f ! -name pom.xml ! -path '/src/proto/*' -delete && find /src -type d -empty -delete

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# Every module builds once with its pom alone, which fetches every plugin and library.
COPY --from=poms /src /src
RUN mvn -B -q -DskipTests -pl tools -am package && rm -rf /src/*/target
# The verbs library's compiler and headers (the debootstrapped build image has them; a public one gets them here).
RUN command -v protoc-c >/dev/null && [ -f /usr/include/infiniband/verbs.h ] && [ -f /usr/include/rdma/rdma_cma.h ] || { apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc make libc6-dev libibverbs-dev librdmacm-dev \
    protobuf-c-compiler libprotobuf-c-dev && rm -rf /var/lib/apt/lists/*; }
COPY . .
RUN mvn -B -q -DskipTests -pl tools -am package && cp tools/target/pagewire.jar /pagewire.jar \
 && make -s -C verbs-c all && mkdir -p /verbs/lib \
 && cp verbs-c/target/libpagewire-verbs.so verbs-c/target/bin/pagewire-run /verbs/ \
 && cp -a verbs-c/target/lib/libibverbs.so.1 verbs-c/target/lib/librdmacm.so.1 /verbs/lib/

FROM ${RUNTIME_IMAGE} AS node
# What verbs programs beside the node need: libibverbs and librdmacm (they link them), protobuf-c (the
# library does), and Debian's ibverbs-utils, rdmacm-utils, perftest and UCX to try it (the debootstrapped
# runtime image has them all).
RUN dpkg-query -W libibverbs1 librdmacm1 libprotobuf-c1 ibverbs-utils rdmacm-utils perftest libucx0 ucx-utils >/dev/null 2>&1 \
 || { apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libibverbs1 librdmacm1 libprotobuf-c1 ibverbs-utils \
    rdmacm-utils perftest libucx0 ucx-utils \
 && rm -rf /var/lib/apt/lists/*; }
RUN groupadd --system --gid 7100 pagewire \
 && useradd --system --uid 7100 --gid pagewire --home-dir /var/lib/pagewire --create-home --shell /usr/sbin/nologin pagewire \
 && mkdir -p /var/lib/pagewire/swap /var/lib/pagewire/rings /var/lib/pagewire/certs \
 && chown -R pagewire:pagewire /var/lib/pagewire
COPY --from=build /pagewire.jar /opt/pagewire/pagewire.jar
# The verbs library, which answers libibverbs and librdmacm both (docs/verbs.md): a program in this container,
# or in one that shares its ring directory, runs on the node with `pagewire-run PROGRAM ARGS`
# (LD_PRELOAD=/usr/lib/pagewire/libpagewire-verbs.so).
COPY --from=build /verbs/ /usr/lib/pagewire/
RUN ln -s /usr/lib/pagewire/pagewire-run /usr/local/bin/pagewire-run
COPY deploy/docker/pagewire-health /usr/lib/pagewire/pagewire-health
# Makes /dev/infiniband/uverbs0..3 for software that looks for a device's file (UCX): it needs root,
# and /dev is the container's own, so a one-shot root container runs it (--null) into a volume the
# nodes mount at /dev/infiniband (docker-compose.yml's uverbs-devices, the pods' init container; docs/verbs.md).
COPY deploy/uverbs-device-files.sh /usr/lib/pagewire/uverbs-device-files.sh
# The node's emulated physical memory is a file in the ring directory (put it on a tmpfs, such as a
# host's /dev/shm, to keep it in RAM), off the heap: size the container's memory limit for
# PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES plus the heap plus ~100 MiB; the node's JVM takes 40 % of the
# limit as heap (more JVM options: JAVA_TOOL_OPTIONS).
ENV PAGEWIRE_NODE_HOST=0.0.0.0 \
    PAGEWIRE_NODE_PORT=7100 \
    PAGEWIRE_NODE_METRICS_PORT=9464 \
    PAGEWIRE_NODE_RING_DIRECTORY=/var/lib/pagewire/rings \
    PAGEWIRE_KERNEL_SWAP_FILE=/var/lib/pagewire/swap/node.swap \
    PAGEWIRE_NODE=127.0.0.1:7100 \
    PAGEWIRE_VERBS_RING_DIRECTORY=/var/lib/pagewire/rings \
    PAGEWIRE_NODE_HEALTH_FILE=/var/lib/pagewire/health
USER pagewire
WORKDIR /var/lib/pagewire
VOLUME ["/var/lib/pagewire/swap"]
EXPOSE 7100 9464
STOPSIGNAL SIGTERM
# The probe starts no JVM: it reads the health file the node rewrites every second (fresh and SERVING:
# healthy). Two failures in a row (a stuck node's file is stale after 5 s) make the node unhealthy
# within three intervals.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=2 CMD ["/usr/lib/pagewire/pagewire-health"]
ENTRYPOINT ["java", "-XX:MaxRAMPercentage=40", "-XX:+ExitOnOutOfMemoryError", "-jar", "/opt/pagewire/pagewire.jar", "node"]
